"""Evaluator files: what a valid file gives, and a bad file's one message naming file and line."""

from __future__ import annotations

import re

import pytest

from ragmon.errors import ConfigError
from ragmon.evaluators import (
    MAX_EVALUATORS,
    EvaluatorFileError,
    evaluator_set_from,
    load_evaluators,
    parse_evaluators,
)

GOOD = """\
evaluators:
  - name: no_email
    kind: regex
    pattern: '[\\w.+-]+@[\\w-]+\\.[a-z]{2,}'
    target: answer_and_contexts
    pass_when: no_match
    threshold: 1.0
  - name: concise
    kind: heuristic
    check: length
    max_words: 120
    role: answer
  - name: polite
    kind: llm
    criterion: Is the answer polite and professional?
    pass_when: yes
  - name: ticket
    kind: json_schema
    schema:
      type: object
      required: [priority]
"""


def test_a_valid_file_gives_one_row_per_evaluator():
    specs = parse_evaluators(GOOD, "e.yaml")
    assert [(s.name, s.kind, s.line) for s in specs] == [
        ("no_email", "regex", 2), ("concise", "heuristic", 8), ("polite", "llm", 13), ("ticket", "json_schema", 17)]
    assert specs[0].threshold == 1.0 and specs[0].target == "answer_and_contexts"
    assert specs[1].options == {"max_words": 120.0} and specs[1].role == "answer"
    assert specs[2].pass_when == "yes"  # YAML reads a bare yes as true: taken back to "yes"
    assert specs[3].schema == {"type": "object", "required": ["priority"]}


@pytest.mark.parametrize(("change", "line", "words"), [
    (("name: concise", "name: Concise"), 8, "must match"),
    (("name: concise", "name: faithfulness"), 8, "built-in metric"),
    (("name: concise", "name: no_email"), 8, "declared twice"),
    (("kind: heuristic", "kind: heuristics"), 9, "kind 'heuristics'"),
    (("[a-z]{2,}'", "[a-z{2,}'"), 4, "invalid regular expression"),
    (("threshold: 1.0", "threshold: 2"), 7, "threshold"),
    (("max_words: 120", "max_words: many"), 11, "max_words"),
    (("role: answer", "role: blame"), 12, "role"),
    (("pass_when: yes", "pass_when: maybe"), 16, "pass_when"),
    (("required: [priority]", "required: 7"), 19, "invalid JSON Schema"),
    (("    target: answer_and_contexts", "    target: answer_and_contexts\n    colour: red"), 6, "unknown key"),
    (("  - name: polite", "  - name: polite\n   bad: [indent"), 14, "not valid YAML"),
])
def test_a_bad_file_names_its_line(change, line, words):
    text = GOOD.replace(*change)
    with pytest.raises(EvaluatorFileError) as caught:
        parse_evaluators(text, "e.yaml")
    message = str(caught.value)
    assert message.startswith(f"e.yaml:{line}: "), message
    assert words in message
    assert "\n" not in message


def test_more_than_sixteen_evaluators_are_refused_at_the_seventeenth():
    items = "".join(f"  - name: e{i}\n    kind: heuristic\n    check: refusal\n" for i in range(MAX_EVALUATORS + 1))
    with pytest.raises(EvaluatorFileError, match=rf"^e.yaml:{2 + 3 * MAX_EVALUATORS}: 17 evaluators; at most 16"):
        parse_evaluators("evaluators:\n" + items, "e.yaml")
    assert len(parse_evaluators("evaluators:\n" + items.rsplit("  - name", 1)[0], "e.yaml")) == MAX_EVALUATORS


def test_files_that_are_not_evaluator_files(tmp_path):
    with pytest.raises(EvaluatorFileError, match="cannot read"):
        load_evaluators(tmp_path / "missing.yaml")
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(EvaluatorFileError, match="not UTF-8"):
        load_evaluators(binary)
    for text in ("- a\n- b\n", "evaluators: 3\n", "checks: []\n"):
        with pytest.raises(EvaluatorFileError, match=r"^x:1: "):
            parse_evaluators(text, "x")
    assert parse_evaluators("evaluators: []\n") == ()


def test_the_set_a_command_runs_comes_from_one_loader(tmp_path):
    """The agent and ``ragmon eval`` both read --evaluators through ``evaluator_set_from``."""
    assert not evaluator_set_from(None) and not evaluator_set_from("")
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    assert evaluator_set_from(good).names == ("no_email", "concise", "polite", "ticket")
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("kind: regex", "kind: nope"))
    where = re.escape(f"--evaluators: {bad}:3: ")
    with pytest.raises(ConfigError, match=rf"^{where}evaluator 'no_email': kind 'nope'") as caught:
        evaluator_set_from(bad)
    assert caught.value.setting == "--evaluators"
