"""``--traces FILE``: OTLP/JSON as the OpenTelemetry Collector's ``file`` exporter writes it.

The file holds one ``ExportTraceServiceRequest``-shaped object (``{"resourceSpans": [...]}``) per
line, as many lines as batches (``format: json``; the exporter's ``proto`` format and its
compression are not read). A file holding a single, possibly pretty-printed, JSON document — or a
JSON array of such documents — is read too.

Each object is decoded by the agent's own decoder (``ingest.decode.otlp``), spans are grouped by trace id
across the whole file (one trace's spans may arrive in several batches) and each trace is built by
the agent's own extraction (``ingest.extract.build_rag_trace``): the same numbers as online.

Which golden row a trace answers:

1. the span attribute (or resource attribute) ``ragmon.eval.row_id`` = the golden id, when any
   span carries it (set it on the pipeline span when replaying the golden set through a deployed
   app: ``ragmon.current_span().set_attribute(...)``, or as baggage turned into an attribute);
2. else the trace's question, compared with the golden questions after collapsing whitespace and
   case; a question matching several golden rows is ambiguous.

Accounting, as for ``--responses``: every golden row gets one Observation (its trace, or
``missing_response``); a line that is not valid OTLP/JSON (or has spans the decoder rejected) is a
``malformed_response`` problem with its line number; a trace that maps to no golden row (unknown
id, unmatched or ambiguous question, no RAG data at all) is ``unknown_id``; a second trace for a row
already answered is ``duplicate_id`` (the first in file order wins). Those go to
``ObservationSet.problems``. When a matched trace carries no question, the golden question is used.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from os import PathLike
from typing import Any, Final

from .. import semconv as sc
from ..errors import DecodeError
from ..ingest.decode.otlp import decode_traces_payload
from ..ingest.extract import build_rag_trace
from ..types import RagTrace, SpanRecord
from .doc_ids import map_doc_ids
from .goldenset import read_input_bytes
from .responses import Rows, complete_observations, golden_rows
from .types import (
    PROBLEM_DUPLICATE_ID,
    PROBLEM_MALFORMED_RESPONSE,
    PROBLEM_UNKNOWN_ID,
    GoldenRow,
    Observation,
    ObservationSet,
    RowProblem,
)

__all__ = ["ROW_ID_ATTRIBUTE", "SOURCE_TRACES", "load_traces", "normalize_question", "parse_traces"]

ROW_ID_ATTRIBUTE: Final = sc.RAGMON_EVAL_ROW_ID
SOURCE_TRACES = "traces"
_MAX_DECODE_ERRORS_SHOWN = 3


def load_traces(path: str | PathLike[str], rows: Rows, *, doc_id_field: str | None = None) -> ObservationSet:
    """Read a Collector file-exporter OTLP/JSON file. Raises ``EvalInputError`` when unreadable."""
    return parse_traces(read_input_bytes(path, "traces file"), rows, doc_id_field=doc_id_field)


def parse_traces(data: bytes, rows: Rows, *, doc_id_field: str | None = None) -> ObservationSet:
    """Decode, assemble and map the traces in ``data`` to the golden rows. Pure."""
    problems: list[RowProblem] = []
    traces: dict[str, dict[str, SpanRecord]] = {}  # trace id -> span id -> span (file order)
    first_line: dict[str, int] = {}
    for line, payload in file_payloads(data, problems):
        try:
            batch = decode_traces_payload(payload, "otlp_json")
        except DecodeError as exc:
            problems.append(_problem(PROBLEM_MALFORMED_RESPONSE, str(exc), line))
            continue
        if batch.rejected_spans:
            shown = "; ".join(batch.errors[:_MAX_DECODE_ERRORS_SHOWN])
            problems.append(_problem(PROBLEM_MALFORMED_RESPONSE,
                                     f"{batch.rejected_spans} span(s) rejected: {shown}", line))
        for span in batch.spans:
            traces.setdefault(span.trace_id, {})[span.span_id] = span
            first_line.setdefault(span.trace_id, line)

    golden = {row.id: row for row in golden_rows(rows)}
    by_question: dict[str, list[str]] = {}
    for row in golden.values():
        by_question.setdefault(normalize_question(row.question), []).append(row.id)

    found: dict[str, Observation] = {}
    answered_by: dict[str, str] = {}
    for trace_id, span_map in traces.items():
        spans = list(span_map.values())
        line = first_line[trace_id]
        trace = build_rag_trace(spans, complete=True)
        row_id, why_not = _golden_id(spans, trace, golden, by_question)
        if row_id is None:
            problems.append(_problem(PROBLEM_UNKNOWN_ID, f"trace {trace_id}: {why_not}", line))
            continue
        if row_id in answered_by:
            problems.append(_problem(PROBLEM_DUPLICATE_ID, f"trace {trace_id}: row {row_id!r} already answered by "
                                     f"trace {answered_by[row_id]}", line, row_id))
            continue
        answered_by[row_id] = trace_id
        found[row_id] = observe(trace, golden[row_id], doc_id_field)
    return complete_observations(rows, found, problems, SOURCE_TRACES)


def observe(trace: RagTrace, row: GoldenRow, doc_id_field: str | None) -> Observation:
    """A trace that answers ``row`` -> its Observation (golden question filled in when missing)."""
    if not trace.question:
        trace = dataclasses.replace(trace, question=row.question)
    mapped = map_doc_ids(trace, doc_id_field)
    return Observation(row.id, trace, retrieved_ids=mapped.ids, unmapped_doc_ids=mapped.unmapped)


def normalize_question(text: str) -> str:
    """Whitespace collapsed, case folded: the key questions are matched by."""
    return " ".join(text.split()).casefold()


# --- file layout ----------------------------------------------------------------------------------------
def file_payloads(data: bytes, problems: list[RowProblem]) -> Iterator[tuple[int, bytes]]:
    """(line number, one OTLP/JSON object as bytes): JSON lines, or one document / array."""
    lines = data.splitlines()
    filled = [(n, raw) for n, raw in enumerate(lines, start=1) if raw.strip()]
    if not filled:
        return
    if len(filled) > 1 and _is_json(filled[0][1]):
        yield from filled  # JSON lines: each decoded (and, when bad, reported) on its own
        return
    line = filled[0][0]
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as exc:
        problems.append(_problem(PROBLEM_MALFORMED_RESPONSE, f"not valid JSON: {exc}", line))
        return
    if isinstance(document, list):
        for item in document:
            yield line, json.dumps(item).encode()
    else:
        yield line, data


def _is_json(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return True


# --- mapping a trace to its golden row -------------------------------------------------------------------
def _golden_id(spans: Sequence[SpanRecord], trace: RagTrace, golden: Mapping[str, GoldenRow],
               by_question: Mapping[str, list[str]]) -> tuple[str | None, str]:
    """(golden id, "") or (None, why not)."""
    declared = _declared_row_id(spans)
    if declared is not None:
        if declared in golden:
            return declared, ""
        return None, f"{ROW_ID_ATTRIBUTE}={declared!r} is not in the eval set"
    if not trace.question:
        if not trace.documents and not trace.answer:
            return None, "no RAG data (no question, documents or answer) and no " + ROW_ID_ATTRIBUTE
        return None, f"no question and no {ROW_ID_ATTRIBUTE} to match it to a golden row"
    matches = by_question.get(normalize_question(trace.question), [])
    if len(matches) == 1:
        return matches[0], ""
    shown = _clip(trace.question)
    if not matches:
        return None, f"question {shown!r} matches no golden question"
    return None, f"question {shown!r} matches {len(matches)} golden rows ({', '.join(matches[:5])}); " \
                 f"set {ROW_ID_ATTRIBUTE} to tell them apart"


def _declared_row_id(spans: Sequence[SpanRecord]) -> str | None:
    ordered = sorted(spans, key=lambda s: (s.parent_span_id is not None, s.start_time_ns))  # roots first
    for span in ordered:
        for attrs in (span.attributes, span.resource):
            value = _id_value(attrs.get(ROW_ID_ATTRIBUTE))
            if value is not None:
                return value
    return None


def _id_value(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _problem(reason: str, message: str, line: int | None, row_id: str | None = None) -> RowProblem:
    return RowProblem(reason, message, line=line, row_id=row_id, source=SOURCE_TRACES)


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
