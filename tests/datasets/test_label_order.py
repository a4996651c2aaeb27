"""The order ``ragmon dataset label --mode judge`` offers candidates in: nearest the threshold first,
pipelines taking turns, unscored last; the same order every time."""

from __future__ import annotations

import pytest

from ragmon.calibration.label_order import uncertainty
from ragmon.datasets.judge_label import order_candidates
from ragmon.evaluation.types import GoldenRow


def _row(i: str, pipeline: str, scores: dict) -> GoldenRow:
    return GoldenRow(id=i, question=f"q {i}", meta={"pipeline": pipeline, "scores": scores})


def test_uncertainty_is_the_distance_of_the_score_nearest_the_cut() -> None:
    assert uncertainty({"faithfulness": 0.9, "answer_relevancy": 0.45}) == pytest.approx(0.05)
    assert uncertainty({"faithfulness": 0.3}, threshold=0.4) == pytest.approx(0.1)
    assert uncertainty({}) == 2.0 and uncertainty({"x": None, "y": True}) == 2.0


def test_nearest_first_pipelines_take_turns_unscored_last() -> None:
    rows = [
        _row("a-far", "a", {"faithfulness": 0.99}),
        _row("none", "a", {}),
        _row("a-near", "a", {"faithfulness": 0.52, "context_precision": 1.0}),
        _row("a-mid", "a", {"faithfulness": 0.2}),
        _row("b-mid", "b", {"faithfulness": 0.75}),
        _row("b-near", "b", {"faithfulness": 0.9, "answer_relevancy": 0.49}),
    ]
    order = [r.id for r in order_candidates(rows)]
    assert order == ["a-near", "b-near", "a-mid", "b-mid", "a-far", "none"]
    assert [r.id for r in order_candidates(list(reversed(rows)))] == order  # not the file's order
