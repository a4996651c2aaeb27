"""``--responses FILE.jsonl``: recorded answers of an app that cannot be imported -> Observations.

One JSON object a line (``null`` counts as absent for every optional key)::

    id             the golden row's id (str or int); required
    retrieved_ids  [id, ...] in rank order (optional; default none). Used as given:
                   ``--doc-id-field`` does not apply, write ids in the golden set's namespace.
    contexts       [text, ...] aligned with retrieved_ids (may be shorter; null = no text). With
                   no retrieved_ids, each context gets the content-hash id the extractor gives
                   documents without an id. More contexts than ids is an error.
    answer         str (optional)
    latency_s      a number (pipeline latency) or {"retrieval": s, "generation": s, "pipeline": s}
                   (each optional; nothing is derived from the others)
    question       str (optional; default: the golden question)
    pipeline       str (optional; default "default")

Other keys are ignored. Each row becomes a ``RagTrace`` (service ``ragmon-eval``, a trace id
derived from the row id), so the metrics and judges read exactly what they read for an
in-process run.

Accounting: every golden row gets one Observation, in golden-set order — evaluated, or with a
problem: ``malformed_response`` (its line is invalid; the message says why) or
``missing_response`` (no line for it). Lines that belong to no golden row go to
``ObservationSet.problems``: ``unknown_id``, ``malformed_response`` without a readable id, and
``duplicate_id`` for a second line with an id already seen (the first line wins).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from os import PathLike
from typing import Any

from ..doc_ids import content_id
from ..types import Document, RagTrace
from .goldenset import RowError, decode_line, parse_id, parse_json_object, read_input_bytes
from .types import (
    PROBLEM_DUPLICATE_ID,
    PROBLEM_MALFORMED_RESPONSE,
    PROBLEM_MISSING_RESPONSE,
    PROBLEM_UNKNOWN_ID,
    GoldenRow,
    GoldenSet,
    Observation,
    ObservationSet,
    RowProblem,
)

__all__ = [
    "DEFAULT_PIPELINE",
    "EVAL_SERVICE",
    "SOURCE_RESPONSES",
    "complete_observations",
    "golden_rows",
    "load_responses",
    "parse_responses",
    "response_trace_id",
]

SOURCE_RESPONSES = "responses"
EVAL_SERVICE = "ragmon-eval"
DEFAULT_PIPELINE = "default"
_LATENCY_KEYS = ("retrieval", "generation", "pipeline")

Rows = GoldenSet | Sequence[GoldenRow]


def load_responses(path: str | PathLike[str], rows: Rows) -> ObservationSet:
    """Read a responses JSONL file. Raises ``EvalInputError`` when it cannot be read."""
    data = read_input_bytes(path, "responses file")
    return parse_responses(data.splitlines(), rows)


def parse_responses(lines: Iterable[bytes | str], rows: Rows) -> ObservationSet:
    """Parse responses lines against the golden rows. Pure."""
    golden = {row.id: row for row in golden_rows(rows)}
    found: dict[str, Observation] = {}
    first_line: dict[str, int] = {}
    extra: list[RowProblem] = []
    for number, raw in enumerate(lines, start=1):
        try:
            text = decode_line(raw, first=number == 1)
            if not text.strip():
                continue
            obj = parse_json_object(text)
            row_id = parse_id(obj.get("id"), "id")
        except RowError as exc:
            extra.append(_problem(PROBLEM_MALFORMED_RESPONSE, str(exc), number))
            continue
        if row_id in first_line:
            extra.append(_problem(PROBLEM_DUPLICATE_ID, f"id {row_id!r} already given on line {first_line[row_id]}",
                                  number, row_id))
            continue
        first_line[row_id] = number
        row = golden.get(row_id)
        if row is None:
            extra.append(_problem(PROBLEM_UNKNOWN_ID, f"id {row_id!r} is not in the eval set", number, row_id))
            continue
        try:
            trace = response_trace(obj, row)
        except RowError as exc:
            found[row_id] = Observation(row_id, None, problem=_problem(PROBLEM_MALFORMED_RESPONSE, str(exc),
                                                                       number, row_id))
            continue
        found[row_id] = Observation(row_id, trace, retrieved_ids=tuple(d.id for d in trace.documents))
    return complete_observations(rows, found, extra, SOURCE_RESPONSES)


def response_trace(obj: Mapping[str, Any], row: GoldenRow) -> RagTrace:
    """One valid responses row -> the ``RagTrace`` it describes. Raises ``RowError``."""
    ids = [parse_id(item, f"retrieved_ids[{i}]") for i, item in enumerate(_list(obj, "retrieved_ids"))]
    contexts = [_opt_str(item, f"contexts[{i}]") for i, item in enumerate(_list(obj, "contexts"))]
    if not ids:
        ids = [content_id(text) if text else "" for text in contexts]
        if "" in ids:
            raise RowError("contexts without retrieved_ids must all be texts (no null)")
    elif len(contexts) > len(ids):
        raise RowError(f"{len(contexts)} contexts but only {len(ids)} retrieved_ids")
    documents = tuple(Document(id=doc, content=contexts[i] if i < len(contexts) else None, rank=i)
                      for i, doc in enumerate(ids))
    answer = _opt_str(obj.get("answer"), "answer")
    question = _opt_str(obj.get("question"), "question") or row.question
    pipeline = _opt_str(obj.get("pipeline"), "pipeline") or DEFAULT_PIPELINE
    retrieval, generation, total = _latencies(obj.get("latency_s"))
    return RagTrace(
        trace_id=response_trace_id(row.id),
        service=EVAL_SERVICE,
        pipeline=pipeline,
        question=question,
        answer=answer,
        documents=documents,
        retrieval_latency_s=retrieval,
        generation_latency_s=generation,
        pipeline_latency_s=total,
        content_sampled=bool(answer or any(d.content for d in documents)),
    )


def response_trace_id(row_id: str) -> str:
    """A stable 32-hex trace id for a responses row (same id, same trace id, every run)."""
    return hashlib.sha256(f"ragmon-eval\0{row_id}".encode()).hexdigest()[:32]


def golden_rows(rows: Rows) -> Sequence[GoldenRow]:
    return rows.rows if isinstance(rows, GoldenSet) else rows


def complete_observations(rows: Rows, found: Mapping[str, Observation], extra: Sequence[RowProblem],
                          source: str) -> ObservationSet:
    """One Observation per golden row in golden order; rows without one get ``missing_response``."""
    out = []
    for row in golden_rows(rows):
        observation = found.get(row.id)
        if observation is None:
            problem = RowProblem(PROBLEM_MISSING_RESPONSE, f"no {source} entry for id {row.id!r}",
                                 row_id=row.id, source=source)
            observation = Observation(row.id, None, problem=problem)
        out.append(observation)
    return ObservationSet(observations=tuple(out), problems=tuple(extra))


# --- field readers -----------------------------------------------------------------------------------
def _problem(reason: str, message: str, line: int, row_id: str | None = None) -> RowProblem:
    return RowProblem(reason, message, line=line, row_id=row_id, source=SOURCE_RESPONSES)


def _list(obj: Mapping[str, Any], key: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise RowError(f"{key!r} must be a list, got {type(value).__name__}")
    return value


def _opt_str(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise RowError(f"{name!r} must be a string, got {type(value).__name__}")
    return value if value.strip() else None


def _latencies(value: Any) -> tuple[float | None, float | None, float | None]:
    """(retrieval, generation, pipeline) seconds."""
    if value is None:
        return None, None, None
    if not isinstance(value, dict):
        return None, None, _seconds(value, "latency_s")
    unknown = sorted(set(value) - set(_LATENCY_KEYS))
    if unknown:
        raise RowError(f"latency_s: unknown stage {unknown[0]!r}; use {', '.join(_LATENCY_KEYS)}")
    retrieval, generation, total = (_seconds(value.get(k), f"latency_s.{k}") for k in _LATENCY_KEYS)
    return retrieval, generation, total


def _seconds(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise RowError(f"{name!r} must be a non-negative number of seconds, got {value!r}")
    return float(value)
