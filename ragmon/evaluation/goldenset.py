"""The golden set: a JSONL file, one question a line -> ``GoldenSet``.

Row schema (``null`` counts as absent for every optional key)::

    id                   str, or int (-> str); required, unique
    question             non-empty str; required
    ground_truth_answer  str (optional; an empty string counts as absent)
    ground_truth_docs    [id, ...]  (grade 1 each)  or  {id: grade}  with int grades 0-3
                         (optional; default: the union of ``hops``, grade 1, else none)
    question_type        factoid | summary | multi_hop | no_answer  (default factoid)
    difficulty           easy | medium | hard  (optional)
    hops                 [[id, ...], [id, ...]]: the acceptable ids of each hop (optional; a hop
                         may be a single id). A multi_hop row without hops is kept; two-hop
                         metrics are simply not computed for it.
    meta                 object (optional)

Document ids are compared as strings, exactly (``42`` and ``"42"`` are the same id).

Blank lines are skipped. A line that is not a valid row (bad JSON, wrong type, unknown
``question_type``, grade out of range, empty question, ...) becomes a ``RowProblem`` with its
1-based line number and what is wrong; a second row with an id already seen becomes a
``duplicate_id`` problem (the first row wins). Everything else is loaded.

Unknown top-level keys are kept in ``meta`` (an explicit ``meta`` key wins), so nothing the
author wrote is lost and breakdowns can use them; because a typo such as ``ground_truth_doc``
would otherwise silently leave a row without gold documents, each unknown key is also reported
once in ``GoldenSet.warnings``, with a "did you mean" suggestion when it is close to a known
key.

:func:`parse_golden_lines` is pure; :func:`load_golden_set` only adds reading the file.
"""

from __future__ import annotations

import difflib
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from ..errors import EvalInputError
from .types import (
    DIFFICULTIES,
    PROBLEM_DUPLICATE_ID,
    PROBLEM_MALFORMED_ROW,
    QUESTION_TYPES,
    GoldenRow,
    GoldenSet,
    RowProblem,
)

__all__ = [
    "KNOWN_KEYS",
    "MAX_GRADE",
    "SOURCE_EVALSET",
    "EvalInputError",
    "load_golden_set",
    "parse_golden_lines",
    "parse_golden_row",
]

SOURCE_EVALSET = "evalset"
MAX_GRADE = 3
KNOWN_KEYS = frozenset({
    "id", "question", "ground_truth_answer", "ground_truth_docs", "question_type", "difficulty", "hops", "meta",
})


class RowError(ValueError):
    """One row is invalid; the message says what is wrong (internal to the parsers)."""


# --- public -------------------------------------------------------------------------------------------
def load_golden_set(path: str | PathLike[str]) -> GoldenSet:
    """Read and parse a golden-set JSONL file. Raises ``EvalInputError`` when it cannot be read."""
    data = read_input_bytes(path, "eval set")
    return parse_golden_lines(data.splitlines(), path=str(path))


def parse_golden_lines(lines: Iterable[bytes | str], *, path: str = "") -> GoldenSet:
    """Parse JSONL lines (bytes or str, without or with their line ends) into a ``GoldenSet``."""
    rows: list[GoldenRow] = []
    problems: list[RowProblem] = []
    seen: dict[str, int] = {}
    unknown_keys: Counter[str] = Counter()
    for number, raw in enumerate(lines, start=1):
        try:
            text = decode_line(raw, first=number == 1)
        except RowError as exc:
            problems.append(RowProblem(PROBLEM_MALFORMED_ROW, str(exc), line=number, source=SOURCE_EVALSET))
            continue
        if not text.strip():
            continue
        try:
            obj = parse_json_object(text)
            unknown_keys.update(k for k in obj if k not in KNOWN_KEYS)
            row = parse_golden_row(obj, line=number)
        except RowError as exc:
            row_id = _loose_id(text)
            problems.append(RowProblem(PROBLEM_MALFORMED_ROW, str(exc), line=number, row_id=row_id,
                                       source=SOURCE_EVALSET))
            continue
        if row.id in seen:
            problems.append(RowProblem(PROBLEM_DUPLICATE_ID, f"id {row.id!r} already used on line {seen[row.id]}",
                                       line=number, row_id=row.id, source=SOURCE_EVALSET))
            continue
        seen[row.id] = number
        rows.append(row)
    return GoldenSet(rows=tuple(rows), problems=tuple(problems), path=path,
                     warnings=tuple(_unknown_key_warnings(unknown_keys)))


def parse_golden_row(obj: Mapping[str, Any], *, line: int = 0) -> GoldenRow:
    """One decoded JSON object -> ``GoldenRow``. Raises ``RowError`` (a ``ValueError``)."""
    row_id = parse_id(obj.get("id"), "id")
    question = obj.get("question")
    if not isinstance(question, str) or not question.strip():
        raise RowError(f"'question' must be a non-empty string, got {_show(question)}")
    answer = obj.get("ground_truth_answer")
    if answer is not None and not isinstance(answer, str):
        raise RowError(f"'ground_truth_answer' must be a string, got {_show(answer)}")
    question_type = _choice(obj, "question_type", QUESTION_TYPES, default="factoid")
    difficulty = _choice(obj, "difficulty", DIFFICULTIES, default=None)
    hops = _hops(obj.get("hops"))
    docs = _gold_docs(obj.get("ground_truth_docs"))
    if obj.get("ground_truth_docs") is None and hops:
        docs = {doc: 1 for hop in hops for doc in sorted(hop)}
    meta_value = obj.get("meta")
    if meta_value is not None and not isinstance(meta_value, dict):
        raise RowError(f"'meta' must be an object, got {_show(meta_value)}")
    extra = {k: v for k, v in obj.items() if k not in KNOWN_KEYS}
    meta = {**extra, **(meta_value or {})}
    return GoldenRow(
        id=row_id,
        question=question,
        ground_truth_docs=docs,
        ground_truth_answer=answer if answer and answer.strip() else None,
        question_type=question_type or "factoid",
        difficulty=difficulty,
        hops=hops,
        meta=meta,
        line=line,
    )


def _unknown_key_warnings(counts: Mapping[str, int]) -> list[str]:
    out = []
    for key, count in sorted(counts.items()):
        close = difflib.get_close_matches(key, sorted(KNOWN_KEYS), n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        out.append(f"unknown key {key!r} on {count} row(s), kept in meta{hint}")
    return out


# --- shared helpers (also used by responses.py and traces_file.py) --------------------------------------
def read_input_bytes(path: str | PathLike[str], what: str) -> bytes:
    """The whole file, or ``EvalInputError`` naming it and why it cannot be read."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise EvalInputError(f"cannot read {what} {str(path)!r}: {exc.strerror or exc}") from exc


def decode_line(raw: bytes | str, *, first: bool = False) -> str:
    """UTF-8 text of one line (a BOM on the first line is dropped). Raises ``RowError``."""
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RowError(f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
    else:
        text = raw
    return text.removeprefix("\ufeff") if first else text


def parse_json_object(text: str) -> dict[str, Any]:
    """One JSON object from a line. Raises ``RowError`` for bad JSON or another JSON type."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise RowError(f"not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise RowError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def parse_id(value: Any, name: str) -> str:
    """A row or document id: a non-empty string (stripped) or an integer. Raises ``RowError``."""
    if isinstance(value, bool) or value is None:
        raise RowError(f"{name!r} must be a string or an integer, got {_show(value)}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise RowError(f"{name!r} must be a non-empty string or an integer, got {_show(value)}")


def _loose_id(text: str) -> str | None:
    """The row's id when it can still be read from an otherwise invalid row (for the report)."""
    try:
        return parse_id(json.loads(text).get("id"), "id")
    except (ValueError, RecursionError, AttributeError):
        return None


def _choice(obj: Mapping[str, Any], key: str, allowed: tuple[str, ...], default: str | None) -> str | None:
    value = obj.get(key)
    if value is None:
        return default
    if value not in allowed:
        raise RowError(f"{key!r} must be one of {', '.join(allowed)}; got {_show(value)}")
    return str(value)


def _gold_docs(value: Any) -> dict[str, int]:
    if value is None:
        return {}
    if isinstance(value, list):
        return {parse_id(item, f"ground_truth_docs[{i}]"): 1 for i, item in enumerate(value)}
    if isinstance(value, dict):
        docs: dict[str, int] = {}
        for key, grade in value.items():
            doc = parse_id(key, "ground_truth_docs key")
            if doc in docs:
                raise RowError(f"ground_truth_docs: id {doc!r} given twice")
            docs[doc] = _grade(grade, doc)
        return docs
    raise RowError(f"'ground_truth_docs' must be a list of ids or an object {{id: grade}}, got {_show(value)}")


def _grade(value: Any, doc: str) -> int:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RowError(f"ground_truth_docs[{doc!r}]: grade must be an integer 0-{MAX_GRADE}, got {_show(value)}")
    if not 0 <= value <= MAX_GRADE:
        raise RowError(f"ground_truth_docs[{doc!r}]: grade {value} out of range 0-{MAX_GRADE}")
    return value


def _hops(value: Any) -> tuple[frozenset[str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise RowError(f"'hops' must be a list with one list of ids per hop, got {_show(value)}")
    hops: list[frozenset[str]] = []
    for i, hop in enumerate(value):
        items = hop if isinstance(hop, list) else [hop]
        ids = frozenset(parse_id(item, f"hops[{i}]") for item in items)
        if not ids:
            raise RowError(f"hops[{i}] is empty: each hop needs at least one acceptable document id")
        hops.append(ids)
    return tuple(hops)


def _show(value: Any, limit: int = 60) -> str:
    """A short, readable rendering of a bad value for a problem message."""
    if value is None:
        return "nothing"
    text = json.dumps(value, ensure_ascii=False, default=str)
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return f"{type(value).__name__} {text}"
