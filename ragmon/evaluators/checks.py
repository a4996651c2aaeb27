"""The rule-based evaluator kinds on one trace's texts: ``regex``, ``heuristic``, ``json_schema``.

Everything here is bounded, because answers and contexts are input: a regex scans at most
``MAX_SCAN_CHARS`` of each text and stops after ``REGEX_TIMEOUT_S`` (the ``regex`` package's
timeout, so a catastrophic pattern cannot stall the agent's event loop); the verdict is then
None (not judged) with reason ``timeout``, counted by the agent.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

import jsonschema
import regex

from ..scoring.metrics import abstention
from . import spec as s

MAX_SCAN_CHARS: Final = 100_000  # per text: the head of a longer answer or context is checked
REGEX_TIMEOUT_S: Final = 0.05  # per text and evaluator
MAX_LETTERS: Final = 4_000  # the language check reads the first letters only

# script -> the first word of the Unicode names of its letters
SCRIPTS: Final = {
    "latin": ("LATIN",), "cyrillic": ("CYRILLIC",), "greek": ("GREEK",), "arabic": ("ARABIC",),
    "hebrew": ("HEBREW",), "devanagari": ("DEVANAGARI",), "thai": ("THAI",), "hangul": ("HANGUL",),
    "cjk": ("CJK", "HIRAGANA", "KATAKANA"),
}


@dataclass(frozen=True, slots=True)
class Outcome:
    """One evaluator on one trace: 1.0 pass, 0.0 fail, None not judged (``error`` says why)."""

    score: float | None
    reason: str = ""
    error: str | None = None  # bounded: "no_answer", "timeout", "not_json"


@lru_cache(maxsize=64)
def _compiled(pattern: str, ignore_case: bool) -> Any:
    return regex.compile(pattern, regex.IGNORECASE if ignore_case else 0)


def _search(pattern: str, ignore_case: bool, texts: Sequence[str]) -> tuple[str | None, bool]:
    """The first match in ``texts`` (its text, shortened) and whether a scan timed out."""
    compiled = _compiled(pattern, ignore_case)
    for text in texts:
        try:
            found = compiled.search(text[:MAX_SCAN_CHARS], timeout=REGEX_TIMEOUT_S)
        except TimeoutError:
            return None, True
        if found is not None:
            return found.group(0)[:40], False
    return None, False


def run_regex(spec: s.EvaluatorSpec, question: str | None, answer: str | None, contexts: Sequence[str]) -> Outcome:
    texts: list[str] = []
    if spec.target in ("answer", "answer_and_contexts"):
        if answer is None:
            return Outcome(None, error="no_answer")
        texts.append(answer)
    if spec.target in ("contexts", "answer_and_contexts"):
        texts.extend(contexts)
    if spec.target == "question":
        if question is None:
            return Outcome(None, error="no_question")
        texts.append(question)
    assert spec.pattern is not None
    found, timed_out = _search(spec.pattern, spec.ignore_case, texts)
    if timed_out:
        return Outcome(None, error="timeout")
    matched = found is not None
    passed = matched if spec.pass_when == "match" else not matched
    reason = f"matched {_mask(found)}" if found is not None else "no match"
    return Outcome(1.0 if passed else 0.0, reason)


def _mask(found: str | None) -> str:
    """Show a match's shape, not its content: a secret caught in an answer must not leak into /worst."""
    if not found:
        return "''"
    return repr(found[:2] + "…" if len(found) > 4 else found[:1] + "…")


def script_share(text: str, script: str) -> float | None:
    """Share of the first letters of ``text`` written in ``script``; None without letters."""
    names = SCRIPTS[script]
    letters = total = 0
    for ch in text[:MAX_SCAN_CHARS]:
        if not ch.isalpha():
            continue
        total += 1
        if unicodedata.name(ch, "").split(" ", 1)[0] in names:
            letters += 1
        if total >= MAX_LETTERS:
            break
    return letters / total if total else None


def run_heuristic(spec: s.EvaluatorSpec, answer: str | None) -> Outcome:
    if answer is None:
        return Outcome(None, error="no_answer")
    o = spec.options
    if spec.check == "length":
        words, chars = len(answer.split()), len(answer)
        problems = [f"{label} {value} {op} {limit:g}" for label, value, op, limit, bad in (
            ("words", words, "<", o.get("min_words", 0), words < o.get("min_words", 0)),
            ("words", words, ">", o.get("max_words", float("inf")), words > o.get("max_words", float("inf"))),
            ("characters", chars, "<", o.get("min_chars", 0), chars < o.get("min_chars", 0)),
            ("characters", chars, ">", o.get("max_chars", float("inf")), chars > o.get("max_chars", float("inf"))),
        ) if bad]
        return Outcome(0.0 if problems else 1.0, "; ".join(problems) or f"{words} words, {chars} characters")
    if spec.check == "language":
        share = script_share(answer, o["script"])
        if share is None:
            return Outcome(None, error="no_letters")
        ok = share >= o["min_share"]
        return Outcome(1.0 if ok else 0.0, f"{share:.0%} of letters {o['script']}")
    if spec.check == "refusal":
        check = abstention.check(answer)
        passed = check.abstained if spec.pass_when == "declined" else not check.abstained
        return Outcome(1.0 if passed else 0.0, f"declined ({check.phrase})" if check.abstained else "answered")
    # citation
    found, timed_out = _search(o["pattern"], False, [answer])
    if timed_out:
        return Outcome(None, error="timeout")
    cited = found is not None
    passed = cited if spec.pass_when == "cited" else not cited
    return Outcome(1.0 if passed else 0.0, f"citation {found}" if cited else "no citation marker")


def _json_text(answer: str) -> str:
    """The answer without a Markdown code fence around it (models often add one)."""
    stripped = answer.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        if stripped.rstrip().endswith("```"):
            stripped = stripped.rstrip()[:-3]
    return stripped


def run_json_schema(spec: s.EvaluatorSpec, answer: str | None) -> Outcome:
    if answer is None:
        return Outcome(None, error="no_answer")
    if len(answer) > MAX_SCAN_CHARS:
        return Outcome(0.0, f"answer longer than {MAX_SCAN_CHARS} characters: not checked as JSON")
    try:
        value = json.loads(_json_text(answer))
    except (json.JSONDecodeError, RecursionError) as exc:
        return Outcome(0.0, f"not JSON: {getattr(exc, 'msg', 'too deeply nested')}")
    assert spec.schema is not None
    validator = _validator(json.dumps(spec.schema, sort_keys=True))
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    except RecursionError:
        return Outcome(0.0, "too deeply nested to validate")
    if error is None:
        return Outcome(1.0, "valid")
    where = "/".join(map(str, error.absolute_path)) or "(root)"
    return Outcome(0.0, f"{where}: {error.message[:120]}")


@lru_cache(maxsize=32)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    return jsonschema.validators.validator_for(schema)(schema)
