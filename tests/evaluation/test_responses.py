"""``--responses``: recorded answers become RagTraces; unknown, missing, duplicate and malformed
rows are each reported, the rest evaluated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragmon.evaluation.goldenset import EvalInputError, parse_golden_lines
from ragmon.evaluation.responses import load_responses, parse_responses, response_trace_id
from ragmon.evaluation.types import (
    PROBLEM_DUPLICATE_ID,
    PROBLEM_MALFORMED_RESPONSE,
    PROBLEM_MISSING_RESPONSE,
    PROBLEM_UNKNOWN_ID,
    GoldenSet,
)
from ragmon.ingest.extract import content_id


def line(**row: Any) -> str:
    return json.dumps(row)


@pytest.fixture
def golden() -> GoldenSet:
    return parse_golden_lines([line(id=f"q{i}", question=f"question {i}", ground_truth_docs=["d1"])
                               for i in range(1, 6)])


def test_row_becomes_a_rag_trace(golden: GoldenSet) -> None:
    result = parse_responses([
        line(id="q1", retrieved_ids=["d3", "d1", 7], contexts=["text 3", "text 1"], answer="It is d1.",
             latency_s={"retrieval": 0.12, "generation": 0.5, "pipeline": 0.7}, pipeline="v2"),
        line(id="q2", retrieved_ids=[], answer=None, latency_s=1.5, question="asked differently"),
    ], golden)
    first = result.observations[0]
    assert first.problem is None
    assert first.retrieved_ids == ("d3", "d1", "7")
    trace = first.trace
    assert trace is not None
    assert [(d.id, d.content, d.rank) for d in trace.documents] == [("d3", "text 3", 0), ("d1", "text 1", 1),
                                                                   ("7", None, 2)]
    assert trace.contexts == ["text 3", "text 1"]
    assert (trace.question, trace.answer) == ("question 1", "It is d1.")  # the golden question by default
    assert (trace.retrieval_latency_s, trace.generation_latency_s, trace.pipeline_latency_s) == (0.12, 0.5, 0.7)
    assert (trace.service, trace.pipeline) == ("ragmon-eval", "v2")
    assert trace.trace_id == response_trace_id("q1") and len(trace.trace_id) == 32
    assert trace.content_sampled is True
    second = result.observations[1].trace
    assert second is not None
    assert second.question == "asked differently"
    assert (second.retrieval_latency_s, second.pipeline_latency_s) == (None, 1.5)
    assert second.documents == () and second.content_sampled is False
    assert second.pipeline == "default"


def test_contexts_without_ids_get_the_extractors_content_ids(golden: GoldenSet) -> None:
    (obs, *_) = parse_responses([line(id="q1", contexts=["alpha", "beta"], answer="a")], golden).observations
    assert obs.retrieved_ids == (content_id("alpha"), content_id("beta"))


def test_unknown_missing_duplicate_and_malformed_each_reported(golden: GoldenSet, tmp_path: Path) -> None:
    path = tmp_path / "responses.jsonl"
    path.write_text("\n".join([
        line(id="q1", retrieved_ids=["d1"], answer="ok"),
        line(id="zzz", retrieved_ids=["d1"], answer="stray"),  # 2: unknown id
        "{broken",  # 3: no id readable
        line(id="q3", retrieved_ids="d1", answer="x"),  # 4: malformed, id known
        line(id="q1", retrieved_ids=["d9"], answer="second"),  # 5: duplicate
        "",
        line(id="q4", retrieved_ids=["d1"], contexts=["a", "b"]),  # 7: more contexts than ids
        line(id="q5", retrieved_ids=["d1"], latency_s={"retrieval": -1}),  # 8: negative latency
    ]) + "\n")
    result = load_responses(path, golden)
    by_id = {o.row_id: o for o in result.observations}
    assert [o.row_id for o in result.observations] == ["q1", "q2", "q3", "q4", "q5"]  # every golden row, in order
    assert by_id["q1"].problem is None and by_id["q1"].trace is not None
    assert by_id["q1"].trace.answer == "ok"  # the first line for an id wins
    assert by_id["q2"].trace is None
    assert by_id["q2"].problem is not None
    assert (by_id["q2"].problem.reason, by_id["q2"].problem.line) == (PROBLEM_MISSING_RESPONSE, None)
    for row_id, number, text in [("q3", 4, "'retrieved_ids' must be a list"),
                                 ("q4", 7, "2 contexts but only 1 retrieved_ids"),
                                 ("q5", 8, "'latency_s.retrieval' must be a non-negative number")]:
        problem = by_id[row_id].problem
        assert problem is not None and by_id[row_id].trace is None
        assert (problem.reason, problem.line, problem.row_id, problem.source) == (
            PROBLEM_MALFORMED_RESPONSE, number, row_id, "responses")
        assert text in problem.message
    assert [(p.reason, p.line, p.row_id) for p in result.problems] == [
        (PROBLEM_UNKNOWN_ID, 2, "zzz"),
        (PROBLEM_MALFORMED_RESPONSE, 3, None),
        (PROBLEM_DUPLICATE_ID, 5, "q1"),
    ]


@pytest.mark.parametrize(("row", "message"), [
    ({"answer": 3}, "'answer' must be a string"),
    ({"contexts": [1]}, "'contexts[0]' must be a string"),
    ({"contexts": ["a", None]}, "contexts without retrieved_ids must all be texts"),
    ({"latency_s": "fast"}, "'latency_s' must be a non-negative number"),
    ({"latency_s": {"total": 1}}, "unknown stage 'total'"),
    ({"retrieved_ids": [["nested"]]}, "'retrieved_ids[0]' must be"),
])
def test_malformed_fields(golden: GoldenSet, row: dict[str, Any], message: str) -> None:
    obs = parse_responses([json.dumps({"id": "q1", **row})], golden).observations[0]
    assert obs.problem is not None and message in obs.problem.message


def test_unreadable_file(golden: GoldenSet, tmp_path: Path) -> None:
    with pytest.raises(EvalInputError, match="cannot read responses file"):
        load_responses(tmp_path / "missing.jsonl", golden)
