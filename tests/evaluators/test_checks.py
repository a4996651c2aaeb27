"""The rule-based evaluators on real answers, and their bounds."""

from __future__ import annotations

from ragmon.evaluators import EvaluatorSet, parse_evaluators
from ragmon.evaluators.checks import MAX_SCAN_CHARS

FILE = """\
evaluators:
  - {name: no_email, kind: regex, pattern: '[\\w.+-]+@[\\w-]+\\.[a-z]{2,}', pass_when: no_match}
  - {name: has_disclaimer, kind: regex, pattern: 'not financial advice', ignore_case: true, pass_when: match}
  - {name: no_card_in_contexts, kind: regex, pattern: '\\b(?:\\d[ -]?){13,16}\\b', target: contexts}
  - {name: concise, kind: heuristic, check: length, min_words: 3, max_words: 12}
  - {name: english, kind: heuristic, check: language, script: latin}
  - {name: answered, kind: heuristic, check: refusal}
  - {name: cited, kind: heuristic, check: citation, pass_when: cited}
  - {name: ticket, kind: json_schema, schema: {type: object, required: [priority],
      properties: {priority: {enum: [low, high]}}}}
"""
SET = EvaluatorSet(parse_evaluators(FILE))


def run(answer, contexts=("Pro costs $49 per month.",)):
    return SET.run("How much is Pro?", answer, list(contexts))


def test_a_plain_good_answer():
    r = run("Pro costs $49 per month [1]. Not financial advice.")
    assert r.scores == {"no_email": 1.0, "has_disclaimer": 1.0, "no_card_in_contexts": 1.0, "concise": 1.0,
                        "english": 1.0, "answered": 1.0, "cited": 1.0, "ticket": 0.0}
    assert r.reasons["ticket"].startswith("not JSON")
    assert r.errors == ()


def test_each_check_fails_on_what_it_is_for():
    r = run("Write to jane.doe@example.com, she will tell you everything about the Pro plan and its prices today",
            contexts=["Card 4111 1111 1111 1111 on file."])
    assert r.scores["no_email"] == 0.0 and r.scores["has_disclaimer"] == 0.0
    assert r.scores["no_card_in_contexts"] == 0.0 and r.scores["concise"] == 0.0 and r.scores["cited"] == 0.0
    # a caught secret is not copied into the reason (it ends up in /worst)
    assert "jane.doe@example.com" not in r.reasons["no_email"] and r.reasons["no_email"].startswith("matched")
    assert run("Про стоит 49 долларов в месяц.").scores["english"] == 0.0
    assert run("I don't know. The documents do not mention it.").scores["answered"] == 0.0


def test_json_answers_are_validated_against_the_schema():
    assert run('{"priority": "high"}').scores["ticket"] == 1.0
    assert run('```json\n{"priority": "low"}\n```').scores["ticket"] == 1.0
    bad = run('{"priority": "urgent"}')
    assert bad.scores["ticket"] == 0.0 and bad.reasons["ticket"].startswith("priority:")
    assert run("[" * 100_000).scores["ticket"] == 0.0  # too deep or too long: a failure, not a crash


def test_no_answer_is_not_judged_and_says_why():
    r = SET.run("q", None, [])
    assert r.scores["no_email"] is None and r.scores["concise"] is None and r.scores["ticket"] is None
    assert ("no_email", "no_answer") in r.errors


def test_a_catastrophic_regex_on_a_huge_answer_stops_at_its_time_limit():
    slow = EvaluatorSet(parse_evaluators("evaluators:\n  - {name: slow, kind: regex, pattern: '(a+)+$'}\n"))
    # without the timeout this backtracks for longer than the test run (2^n paths)
    r = slow.run("q", "a" * 5_000 + "b", [])
    assert r.scores == {"slow": None} and r.errors == (("slow", "timeout"),)
    # only the head of a longer text is scanned: a match past it is not seen
    tail = EvaluatorSet(parse_evaluators("evaluators:\n  - {name: tail, kind: regex, pattern: 'SECRET'}\n"))
    assert tail.run("q", "x" * MAX_SCAN_CHARS + "SECRET", []).scores == {"tail": 1.0}
    assert tail.run("q", "x" * 10 + "SECRET", []).scores == {"tail": 0.0}


def test_llm_criteria_come_from_the_judge_and_are_never_guessed():
    s = EvaluatorSet(parse_evaluators("evaluators:\n  - {name: polite, kind: llm, criterion: 'Polite?'}\n"))
    assert s.run("q", "a", [], {"polite": 0.0}).scores == {"polite": 0.0}
    missing = s.run("q", "a", [], {})
    assert missing.scores == {"polite": None} and missing.errors == (("polite", "missing_verdict"),)
