"""``--traces``: OTLP/JSON lines as the Collector's file exporter writes them, made from real
OpenTelemetry SDK spans (ragmon's decorators), decoded and extracted the agent's way."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragmon
from ragmon.evaluation.capture import to_rag_trace
from ragmon.evaluation.goldenset import EvalInputError, parse_golden_lines
from ragmon.evaluation.traces_file import ROW_ID_ATTRIBUTE, load_traces, parse_traces
from ragmon.evaluation.types import (
    PROBLEM_DUPLICATE_ID,
    PROBLEM_MALFORMED_RESPONSE,
    PROBLEM_MISSING_RESPONSE,
    PROBLEM_UNKNOWN_ID,
    GoldenSet,
)
from tests.evaluation.apps import rag_apps
from tests.evaluation.apps.sdk_state import fresh_sdk


@pytest.fixture(autouse=True)
def _fresh_sdk() -> Iterator[None]:
    with fresh_sdk():
        yield


class Recorder:
    """ragmon's SDK with an in-memory exporter; calls grouped per trace in call order."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = ragmon.init(service_name="prod-bot", exporter="none", set_global=False,
                                    span_processor=SimpleSpanProcessor(self.exporter))
        self.calls: list[list[ReadableSpan]] = []

    def call(self, question: str, row_id: str | None = None) -> list[ReadableSpan]:
        before = len(self.exporter.get_finished_spans())
        if row_id is None:
            rag_apps.answer_sync(question)
        else:  # a replay script's span around the app, carrying the golden id
            with self.provider.get_tracer("replay").start_as_current_span(
                    "replay", attributes={ROW_ID_ATTRIBUTE: row_id}):
                rag_apps.answer_sync(question)
        spans = list(self.exporter.get_finished_spans()[before:])
        self.calls.append(spans)
        return spans


def collector_line(spans: Sequence[ReadableSpan]) -> str:
    """One line as the Collector's file exporter writes it: OTLP/JSON (hex ids, int enums)."""
    document = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource_spans in document["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document, separators=(",", ":"))


@pytest.fixture
def golden() -> GoldenSet:
    rows = [
        {"id": "q1", "question": "Where is  doc:a   and doc:b?", "ground_truth_docs": ["a"]},
        {"id": "q2", "question": "anything, the id decides", "ground_truth_docs": ["c"]},
        {"id": "q3", "question": "never asked doc:z", "ground_truth_docs": ["z"]},
        {"id": "q4", "question": "Twice doc:d", "ground_truth_docs": ["d"]},
        {"id": "q5", "question": "twice   DOC:d", "ground_truth_docs": ["d"]},
    ]
    return parse_golden_lines([json.dumps(r) for r in rows])


def test_collector_file_maps_traces_to_golden_rows(golden: GoldenSet, tmp_path: Path) -> None:
    rec = Recorder()
    q1 = rec.call("WHERE is doc:a and doc:b?")  # matched by question: whitespace and case ignored
    q2 = rec.call("different text doc:c", row_id="q2")  # matched by the id attribute
    dup = rec.call("Where is doc:a and doc:b?")  # q1 again
    stray = rec.call("not in the golden set doc:x")
    wrong_id = rec.call("doc:y", row_id="q99")
    ambiguous = rec.call("twice doc:d")  # q4 and q5 have the same normalized question
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join([
        collector_line(q1 + q2[:1]),  # q2's spans are split over two batches
        "{oops",  # line 2
        collector_line(q2[1:] + dup),
        json.dumps({"resourceSpans": 5}),  # line 4: JSON, but not OTLP
        "",
        collector_line(stray + wrong_id + ambiguous),
    ]) + "\n")

    result = load_traces(path, golden, doc_id_field="source")

    obs = {o.row_id: o for o in result.observations}
    assert list(obs) == ["q1", "q2", "q3", "q4", "q5"]
    first, second = obs["q1"], obs["q2"]
    assert first.problem is None and first.trace is not None
    assert first.trace.question == "WHERE is doc:a and doc:b?"
    assert first.trace.answer == "answer from a,b"
    assert first.retrieved_ids == ("a.md", "b.md")  # --doc-id-field source
    assert first.trace.service == "prod-bot" and first.trace.pipeline == "sync-rag"
    assert second.trace is not None and second.trace.span_count == len(q2) == 4  # both batches' spans
    assert second.retrieved_ids == ("c.md",)
    for row_id in ("q3", "q4", "q5"):
        problem = obs[row_id].problem
        assert problem is not None and problem.reason == PROBLEM_MISSING_RESPONSE
    problems = [(p.reason, p.line, p.row_id) for p in result.problems]
    assert problems == [
        (PROBLEM_MALFORMED_RESPONSE, 2, None),
        (PROBLEM_MALFORMED_RESPONSE, 4, None),
        (PROBLEM_DUPLICATE_ID, 3, "q1"),
        (PROBLEM_UNKNOWN_ID, 6, None),
        (PROBLEM_UNKNOWN_ID, 6, None),
        (PROBLEM_UNKNOWN_ID, 6, None),
    ]
    messages = [p.message for p in result.problems]
    assert "not valid JSON" in messages[0]
    assert "matches no golden question" in messages[3]
    assert "ragmon.eval.row_id='q99' is not in the eval set" in messages[4]
    assert "matches 2 golden rows (q4, q5)" in messages[5]
    assert all(p.source == "traces" for p in result.problems)


def test_file_trace_equals_the_in_process_capture(golden: GoldenSet) -> None:
    """Same spans, two routes (OTLP/JSON file vs in-memory protobuf): the same RagTrace."""
    rec = Recorder()
    spans = rec.call("Where is doc:a and doc:b?")
    result = parse_traces(collector_line(spans).encode(), golden)
    assert result.observations[0].trace == to_rag_trace(spans)


def test_single_pretty_printed_document_and_json_array(golden: GoldenSet) -> None:
    rec = Recorder()
    spans = rec.call("Where is doc:a and doc:b?")
    document: dict[str, Any] = json.loads(collector_line(spans))
    pretty = json.dumps(document, indent=2).encode()
    for data in (pretty, json.dumps([document]).encode()):
        result = parse_traces(data, golden)
        assert result.problems == ()
        assert result.observations[0].retrieved_ids == ("a", "b")


def test_non_rag_trace_is_reported_not_dropped(golden: GoldenSet) -> None:
    rec = Recorder()
    with rec.provider.get_tracer("app").start_as_current_span("healthcheck"):
        pass
    result = parse_traces(collector_line(rec.exporter.get_finished_spans()).encode(), golden)
    (problem,) = result.problems
    assert problem.reason == PROBLEM_UNKNOWN_ID and "no RAG data" in problem.message


def test_unreadable_file(golden: GoldenSet, tmp_path: Path) -> None:
    with pytest.raises(EvalInputError, match="cannot read traces file"):
        load_traces(tmp_path / "missing.json", golden)
