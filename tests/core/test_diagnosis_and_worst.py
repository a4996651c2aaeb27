import math

import pytest

from ragmon import semconv as sc
from ragmon.export.latency import SlidingQuantile
from ragmon.export.metrics import LabelLimiter
from ragmon.export.worst import WorstTraces
from ragmon.scoring.metrics.diagnosis import diagnose, thresholds
from ragmon.types import Scores

T = thresholds()


@pytest.mark.parametrize(
    ("cp", "f", "ar", "verdict"),
    [
        (0.9, 0.9, 0.9, sc.VERDICT_OK),
        (0.1, 0.9, 0.9, sc.VERDICT_RETRIEVAL),  # low context relevance -> retrieval
        (0.9, 0.1, 0.9, sc.VERDICT_GENERATION),  # good context, unfaithful -> hallucination
        (0.9, 0.9, 0.1, sc.VERDICT_GENERATION),  # good context, faithful, off-topic -> wrong part
        (0.1, 0.1, 0.9, sc.VERDICT_BOTH),  # bad contexts and claims beyond them
        (0.1, 0.9, 0.1, sc.VERDICT_RETRIEVAL),  # answer off-topic because the contexts are: fix retrieval
        (0.1, 0.1, 0.1, sc.VERDICT_BOTH),
        (None, 0.9, 0.9, sc.VERDICT_OK),  # not computable never fails on its own
    ],
)
def test_diagnosis_table(cp, f, ar, verdict):
    got, reason = diagnose(
        Scores({sc.METRIC_FAITHFULNESS: f, sc.METRIC_ANSWER_RELEVANCY: ar, sc.METRIC_CONTEXT_PRECISION: cp}), T
    )
    assert got == verdict
    assert reason


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_worst_keeps_the_n_worst_with_text_capped_and_expires():
    clock = FakeClock()
    worst = WorstTraces(size=2, max_chars=5, ttl_s=10, clock=clock)
    for i, score in enumerate([0.9, 0.2, 0.5, 0.1]):
        worst.offer(trace_id=f"t{i}", service="s", pipeline="p", scores={"faithfulness": score},
                    verdict="x", reason="r", question="question text", answer="answer text")
    snap = worst.snapshot()
    assert [e["trace_id"] for e in snap] == ["t3", "t1"]
    assert snap[0]["question"] == "quest…"
    clock.now = 11
    assert worst.snapshot() == []


def test_sliding_quantile_window():
    clock = FakeClock()
    q = SlidingQuantile(window_s=60, clock=clock)
    assert math.isnan(q.quantile(0.95))
    for v in range(1, 101):
        q.observe(v / 100)
    assert q.quantile(0.95) == pytest.approx(0.9505, abs=1e-6)
    clock.now = 61
    q.observe(5.0)
    assert q.quantile(0.95) == 5.0


def test_label_limiter_bounds_values():
    limit = LabelLimiter(2)
    got = [limit("a"), limit("b"), limit("c"), limit("a"), limit(None)]
    assert got == ["a", "b", sc.OVERFLOW_LABEL, "a", sc.OVERFLOW_LABEL]
