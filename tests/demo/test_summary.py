"""The demo's bookkeeping and summary: tracker joins, counter reading, rendering."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from ragmon import semconv as sc
from ragmon.demo.app import DemoAnswer
from ragmon.demo.corpus import load_corpus
from ragmon.demo.counts import counts_from_registry, counts_from_text
from ragmon.demo.failures import Contradiction, FailureKind
from ragmon.demo.summary import SECTION_TITLES, AgentCounts, DemoView, progress_line, render
from ragmon.demo.tracker import DemoTracker
from ragmon.export.metrics import AgentMetrics
from ragmon.scoring.metrics.diagnosis import thresholds as diagnosis_thresholds
from ragmon.types import RagTrace, Scores

SERVICE = "ragmon-demo"


def _answer(trace_id: str, kind: FailureKind, retrieval_s: float = 0.03) -> DemoAnswer:
    return DemoAnswer(question="q?", failure=kind, answer="a.", trace_id=trace_id, retrieval_s=retrieval_s)


def _scored(tracker: DemoTracker, trace_id: str, verdict: str, retrieval_s: float = 0.03, **scores: float) -> None:
    trace = RagTrace(trace_id=trace_id, service=SERVICE, pipeline="support_bot", retrieval_latency_s=retrieval_s)
    tracker.on_scores(trace, Scores(scores, judge="local"), verdict)


def _filled_tracker() -> DemoTracker:
    t = DemoTracker(diagnosis_thresholds(), slow_threshold_s=0.5)
    good = {"faithfulness": 0.95, "answer_relevancy": 0.9, "context_precision": 1.0}
    t.record_request(_answer("a1", FailureKind.HEALTHY))
    _scored(t, "a1", sc.VERDICT_OK, **good)
    _scored(t, "a2", sc.VERDICT_GENERATION, faithfulness=0.4, answer_relevancy=0.9, context_precision=1.0)
    t.record_request(_answer("a2", FailureKind.HEALTHY))  # the listener may come first
    c1 = _answer("c1", FailureKind.CONTRADICTION)
    c1.contradiction = Contradiction("a.", "number", "30 days", "60 days")
    t.record_request(c1)
    _scored(t, "c1", sc.VERDICT_GENERATION, faithfulness=0.2, answer_relevancy=0.9, context_precision=1.0)
    c2 = _answer("c2", FailureKind.CONTRADICTION)
    c2.contradiction = Contradiction("a.", "name", "Team", "Business")
    t.record_request(c2)
    _scored(t, "c2", sc.VERDICT_OK, faithfulness=0.7, answer_relevancy=0.9, context_precision=1.0)
    t.record_request(_answer("c3", FailureKind.CONTRADICTION))  # sent, not scored (not sampled)
    t.record_request(_answer("m1", FailureKind.RETRIEVAL_MISS))
    _scored(t, "m1", sc.VERDICT_BOTH, faithfulness=0.9, answer_relevancy=0.1, context_precision=0.0)
    t.record_request(_answer("s1", FailureKind.SLOW_RETRIEVAL, 0.9))
    _scored(t, "s1", sc.VERDICT_OK, retrieval_s=0.9, **good)
    _scored(t, "zz", sc.VERDICT_OK, **good)  # another app's trace on the same agent
    return t


def test_tracker_joins_injected_kind_with_scores() -> None:
    snap = _filled_tracker().snapshot()
    healthy, contra = snap.kinds[FailureKind.HEALTHY], snap.kinds[FailureKind.CONTRADICTION]
    assert (healthy.sent, healthy.scored, healthy.flagged) == (2, 2, 1)
    assert healthy.means["faithfulness"] == (0.95 + 0.4) / 2
    assert (contra.sent, contra.scored, contra.caught, contra.signal_below) == (3, 2, 1, 1)
    assert contra.means["faithfulness"] == (0.2 + 0.7) / 2
    miss = snap.kinds[FailureKind.RETRIEVAL_MISS]
    assert (miss.caught, miss.signal_below) == (1, 1)  # "both" counts as a caught retrieval miss
    slow = snap.kinds[FailureKind.SLOW_RETRIEVAL]
    assert slow.caught == 1 and slow.retrieval_p95_s == 0.9
    assert snap.kinds[FailureKind.OFF_TOPIC].scored == 0
    assert snap.unmatched_scored == 1
    assert snap.contradiction_changes == {"number": 1, "name": 1}
    assert snap.contradiction_caught == {"number": (1, 1), "name": (0, 1)}


def test_counts_from_the_agent_registry_and_from_metrics_text() -> None:
    m = AgentMetrics(CollectorRegistry())
    for _ in range(5):
        m.traces_received.labels(SERVICE, "support_bot").inc()
    m.traces_received.labels("other-app", "x").inc(7)
    m.traces_sampled.labels(SERVICE, "support_bot", sc.SAMPLED_RATE).inc(4)
    m.traces_scored.labels(SERVICE, "support_bot", "local").inc(3)
    m.traces_skipped.labels(SERVICE, "support_bot", sc.SKIP_NOT_SAMPLED).inc(1)
    m.traces_failed.labels(SERVICE, "support_bot", "local", sc.FAIL_INTERNAL).inc(1)
    m.diagnosis.labels(SERVICE, "support_bot", sc.VERDICT_OK).inc(2)
    m.diagnosis.labels(SERVICE, "support_bot", sc.VERDICT_BOTH).inc(1)
    m.retrieval_latency_p95.labels(SERVICE, "support_bot").set(0.75)
    expected = AgentCounts(
        received=5, sampled=4, scored=3, skipped={sc.SKIP_NOT_SAMPLED: 1}, failed={sc.FAIL_INTERNAL: 1},
        verdicts={sc.VERDICT_OK: 2, sc.VERDICT_BOTH: 1}, retrieval_p95_s=0.75, pipeline_p95_s=None,
    )
    assert counts_from_registry(m.registry, SERVICE) == expected
    assert counts_from_text(generate_latest(m.registry).decode(), SERVICE) == expected


def _view(**kw: object) -> DemoView:
    corpus = load_corpus()
    base: dict[str, object] = dict(
        mode="inprocess", elapsed_s=12.0, duration_s=30.0, rate=5.0, seed=1, company=corpus.company,
        document_count=len(corpus.documents), otlp_endpoint="http://127.0.0.1:5555/v1/traces",
        tracker=_filled_tracker().snapshot(),
        thresholds={"faithfulness": 0.5, "answer_relevancy": 0.5, "context_precision": 0.5},
        slow_threshold_s=0.5, sample_rate=0.8, metrics_url="http://127.0.0.1:9464",
        counts=AgentCounts(received=9, sampled=7, scored=7, skipped={"not_sampled": 2},
                           verdicts={"ok": 4, "both": 1, "generation_failure": 2}, retrieval_p95_s=0.81),
    )
    base.update(kw)
    return DemoView(**base)  # type: ignore[arg-type]


def test_render_explains_and_shows_every_section() -> None:
    text = render(_view())
    for title in SECTION_TITLES:
        assert title in text
    assert "What you are looking at" in text and "Brightdesk" in text
    assert "http://127.0.0.1:9464/metrics" in text and "http://127.0.0.1:9464/worst" in text
    assert "ragmon agent" in text
    assert "received 9 traces" in text and "scored 7" in text and "not_sampled 2" in text
    assert "retrieval P95 0.810 s" in text
    contra_row = next(line for line in text.splitlines() if line.strip().startswith("contradiction "))
    assert "0.45 ▼" in contra_row  # mean faithfulness 0.45, below the 0.5 threshold
    caught_contra = [line for line in text.splitlines() if line.strip().startswith("contradiction")][-1]
    assert "1/2 (50%)" in caught_contra
    assert "by changed fact: name 0/1, number 1/1" in text
    assert "false alarms" in text and "1/3 (33%)" in text
    assert "\x1b[" not in text
    assert "\x1b[31m" in render(_view(), color=True)


def test_compact_render_for_short_terminals() -> None:
    full, compact = render(_view()), render(_view(), compact=True)
    assert "What you are looking at" not in compact and "Look next" not in compact
    assert "Scores by injected failure" in compact and "Caught?" in compact
    assert len(compact.splitlines()) < len(full.splitlines()) - 8


def test_render_final_and_external() -> None:
    final = render(_view(final=True, stopped_early=True, elapsed_s=7.2))
    assert "final summary" in final and "stopped early (Ctrl-C)" in final
    ext = render(_view(mode="external", counts=None, metrics_url=None))
    assert "no in-process score listener" in ext
    assert "the ragmon agent at http://127.0.0.1:5555/v1/traces" in ext
    assert "Caught?" not in ext


def test_progress_line() -> None:
    line = progress_line(_view())
    assert "[12s/30s]" in line and "received 9 scored 7" in line
    assert "faithfulness healthy 0.68 / contradiction 0.45" in line


def test_look_next_says_how_long_the_urls_are_served() -> None:
    live = render(_view())
    assert "(served while the demo runs)" in live
    final = render(_view(final=True))
    assert "stop when the demo exits" in final and "--linger" in final
    lingering = render(_view(final=True, linger_s=300.0))
    assert "served for 300 s more after this summary" in lingering
    ext = render(_view(mode="external", metrics_url="http://127.0.0.1:9464", final=True))
    assert "--linger" not in ext  # an external agent keeps serving on its own
