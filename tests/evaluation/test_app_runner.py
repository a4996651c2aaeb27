"""``ragmon eval --app``: real decorated apps called in-process, their real spans captured and
extracted the agent's way; errors, hangs and untraced apps reported per row."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider

import ragmon
from ragmon.evaluation.app_runner import load_app, run_app
from ragmon.evaluation.goldenset import EvalInputError, parse_golden_lines
from ragmon.evaluation.types import PROBLEM_APP_ERROR, PROBLEM_APP_TIMEOUT, PROBLEM_NO_TRACE, GoldenRow
from tests.evaluation.apps import rag_apps
from tests.evaluation.apps.sdk_state import fresh_sdk

APPS = "tests.evaluation.apps.rag_apps"


@pytest.fixture(autouse=True)
def _fresh_state() -> Iterator[None]:
    rag_apps.reset_counters()
    rag_apps.RELEASE.clear()
    with fresh_sdk():
        yield
    rag_apps.RELEASE.set()  # let any abandoned hanging call finish
    rag_apps.reset_counters()


def rows(*questions: str) -> list[GoldenRow]:
    lines = [json.dumps({"id": f"r{i}", "question": q}) for i, q in enumerate(questions)]
    return list(parse_golden_lines(lines).rows)


def expected_ids(question: str) -> tuple[str, ...]:
    return tuple(re.findall(r"doc:(\w+)", question))


async def test_sync_app_every_row_evaluated() -> None:
    golden = rows("first doc:a doc:b", "second doc:c")
    seen: list[tuple[int, int]] = []
    observations = await run_app(golden, f"{APPS}:answer_sync", concurrency=2, timeout_s=10,
                                 progress=lambda done, total: seen.append((done, total)))
    assert [o.row_id for o in observations] == ["r0", "r1"]
    first = observations[0]
    assert first.problem is None and first.trace is not None
    assert first.retrieved_ids == ("a", "b")
    assert first.app_output == "answer from a,b"
    trace = first.trace
    assert (trace.question, trace.answer) == ("first doc:a doc:b", "answer from a,b")
    assert (trace.service, trace.pipeline) == ("ragmon-eval", "sync-rag")
    assert trace.contexts == ["Text of document a.", "Text of document b."]
    assert trace.content_sampled is True and trace.span_count == 3
    assert trace.retrieval_latency_s is not None and trace.pipeline_latency_s is not None
    assert trace.pipeline_latency_s >= trace.retrieval_latency_s
    assert trace.attributes.get("llm.model_name") == "fake-1"
    assert observations[1].retrieved_ids == ("c",)
    assert sorted(seen) == [(1, 2), (2, 2)]


async def test_concurrent_sync_calls_overlap_are_bounded_and_keep_their_own_spans() -> None:
    rag_apps.BARRIER = threading.Barrier(4)  # only passes when 4 calls really run at once
    questions = [f"question {i} doc:x{i} doc:y{i}" for i in range(8)]
    observations = await run_app(rows(*questions), rag_apps.answer_sync, concurrency=4, timeout_s=20)
    assert rag_apps.MAX_ACTIVE == 4
    for question, obs in zip(questions, observations, strict=True):
        assert obs.problem is None and obs.trace is not None
        assert obs.trace.question == question
        assert obs.retrieved_ids == expected_ids(question)
        assert obs.trace.span_count == 3
    assert len({o.trace.trace_id for o in observations if o.trace}) == 8


async def test_concurrent_async_calls_keep_their_own_spans() -> None:
    questions = [f"q{i} " + " ".join(f"doc:d{i}_{j}" for j in range(i % 3 + 1)) for i in range(12)]
    observations = await run_app(rows(*questions), f"{APPS}:answer_async", concurrency=6, timeout_s=10)
    for question, obs in zip(questions, observations, strict=True):
        assert obs.problem is None and obs.trace is not None
        assert (obs.trace.question, obs.trace.pipeline) == (question, "async-rag")
        assert obs.retrieved_ids == expected_ids(question)
        assert obs.trace.answer == f"answer from {','.join(expected_ids(question))}"


@pytest.mark.parametrize("app", ["flaky", "flaky_async"])
async def test_raising_and_hanging_rows_reported_the_rest_evaluated(app: str) -> None:
    golden = rows("fine doc:a", "please explode doc:b", "please hang doc:c", "also fine doc:d", "hang too doc:e")
    observations = await run_app(golden, f"{APPS}:{app}", concurrency=2, timeout_s=0.3)
    by_id = {o.row_id: o for o in observations}
    assert [o.row_id for o in observations] == ["r0", "r1", "r2", "r3", "r4"]
    for row_id, ids in (("r0", ("a",)), ("r3", ("d",))):
        assert by_id[row_id].problem is None and by_id[row_id].retrieved_ids == ids
    error = by_id["r1"].problem
    assert error is not None and by_id["r1"].trace is None
    assert (error.reason, error.row_id, error.source) == (PROBLEM_APP_ERROR, "r1", "app")
    assert error.message.startswith("AppFailure: ")
    for row_id in ("r2", "r4"):
        problem = by_id[row_id].problem
        assert problem is not None and by_id[row_id].trace is None
        assert problem.reason == PROBLEM_APP_TIMEOUT and "0.3 s" in problem.message
    if app == "flaky":  # the hung sync calls were abandoned, not waited for
        assert any(t.name == "ragmon-eval-app" and t.is_alive() for t in threading.enumerate())


async def test_app_without_rag_spans_is_no_trace() -> None:
    (obs,) = await run_app(rows("doc:a"), f"{APPS}:undecorated", concurrency=1, timeout_s=5)
    assert obs.trace is None and obs.problem is not None
    assert obs.problem.reason == PROBLEM_NO_TRACE and "@ragmon.pipeline" in obs.problem.message
    assert obs.app_output == "an answer nobody traced"


@pytest.mark.parametrize(("app", "answer"), [("answer_stream", "streamed answer from a"),
                                             ("answer_async_stream", "answer from a"),
                                             ("Bot.ask", "answer from a")])
async def test_streaming_entry_points_and_dotted_attribute(app: str, answer: str) -> None:
    (obs,) = await run_app(rows("doc:a"), f"{APPS}:{app}", concurrency=1, timeout_s=5)
    assert obs.problem is None and obs.trace is not None
    assert obs.app_output == answer and obs.trace.answer == answer
    assert obs.retrieved_ids == ("a",)


async def test_doc_id_field_maps_metadata_and_counts_documents_without_it() -> None:
    observations = await run_app(rows("doc:a doc:b"), rag_apps.answer_sync, doc_id_field="nested.doi",
                                 concurrency=1, timeout_s=5)
    assert observations[0].retrieved_ids == ("10.1/a", "10.1/b")
    assert observations[0].unmapped_doc_ids == 0
    observations = await run_app(rows("doc:a doc:b"), rag_apps.answer_sync, doc_id_field="isbn",
                                 concurrency=1, timeout_s=5)
    assert observations[0].retrieved_ids == ("a", "b")  # fell back to the document ids ...
    assert observations[0].unmapped_doc_ids == 2  # ... and says so


async def test_many_documents_are_not_cut() -> None:
    question = " ".join(f"doc:n{i}" for i in range(150))  # beyond the SDK's default max_documents (128)
    (obs,) = await run_app(rows(question), rag_apps.answer_sync, concurrency=1, timeout_s=10)
    assert obs.trace is not None and len(obs.retrieved_ids) == 150
    assert obs.trace.attribute_limit_hit is False


async def test_apps_own_otel_spans_join_and_an_import_time_init_is_replaced() -> None:
    provider = TracerProvider()
    otel_trace.set_tracer_provider(provider)  # the app configured OpenTelemetry itself ...
    ragmon.init(service_name="bot", endpoint="http://127.0.0.1:9/v1/traces")  # ... and ragmon at import
    golden = rows("own spans doc:a", "second doc:b")
    observations = await run_app(golden, f"{APPS}:with_own_otel", concurrency=2, timeout_s=10)
    for obs in observations:
        assert obs.problem is None and obs.trace is not None
        assert obs.trace.pipeline == "otel-rag"
        assert obs.trace.span_count == 4  # pipeline, rewrite-query (global provider), search, llm
    assert [o.retrieved_ids for o in observations] == [("a",), ("b",)]


def test_load_app_errors_are_clear() -> None:
    assert load_app(f"{APPS}:Bot.ask") is rag_apps.Bot.ask
    with pytest.raises(EvalInputError, match=r"expected 'package\.module:function'"):
        load_app("no_colon_here")
    with pytest.raises(EvalInputError, match="cannot import 'no_such_module_xyz': ModuleNotFoundError"):
        load_app("no_such_module_xyz:run")
    with pytest.raises(EvalInputError, match="has no attribute 'missing'"):
        load_app(f"{APPS}:missing")
    with pytest.raises(EvalInputError, match="is a float, not a function"):
        load_app(f"{APPS}:HANG_LIMIT_S")
