"""The score recorder alone: a judged trace's scores, failing shares (to the sampler for the rate
stream only), evaluators merged, contradictions, diagnosis, /worst, /traces/{id} and listeners."""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping

from prometheus_client import CollectorRegistry

from ragmon import semconv as sc
from ragmon._log import LogOnce
from ragmon.agent.scores import ScoreRecorder
from ragmon.evaluators import EvaluatorSet, parse_evaluators
from ragmon.export.inspector import RecentTraces
from ragmon.export.metrics import AgentMetrics
from ragmon.export.worst import WorstTraces
from ragmon.scoring.claim_verdicts import CONTRADICTED
from ragmon.types import Document, RagTrace, Scores

EVALUATORS = """
evaluators:
  - name: no_pii
    kind: regex
    pattern: '[\\w.+-]+@[\\w-]+\\.[a-z]{2,}'
    target: answer
    pass_when: no_match
    threshold: 1.0
    role: answer
"""
THRESHOLDS = {sc.METRIC_FAITHFULNESS: 0.7, sc.METRIC_ANSWER_RELEVANCY: 0.7, sc.METRIC_CONTEXT_PRECISION: 0.5}
LABELS = {"service": "svc", "pipeline": "p", "judge": "j"}


class _Shares:
    def __init__(self) -> None:
        self.seen: list[tuple[Hashable, dict[str, bool], dict[str, float]]] = []

    def __call__(self, key: Hashable, failing: Mapping[str, bool], youden: Mapping[str, float]) -> None:
        self.seen.append((key, dict(failing), dict(youden)))


def _recorder(evaluators: EvaluatorSet | None = None) -> tuple[ScoreRecorder, AgentMetrics, _Shares]:
    metrics = AgentMetrics(CollectorRegistry())
    shares = _Shares()
    recorder = ScoreRecorder(metrics, thresholds=THRESHOLDS, evaluators=evaluators or EvaluatorSet(),
                             worst=WorstTraces(10, 500, clock=lambda: 0.0), inspector=RecentTraces(10, 500),
                             observe_shares=shares, log_once=LogOnce(logging.getLogger("test")))
    return recorder, metrics, shares


def _trace(trace_id: str = "a" * 32, answer: str = "The price is 5 dollars.") -> RagTrace:
    return RagTrace(trace_id=trace_id, service="svc", pipeline="p", question="price?", answer=answer,
                    documents=(Document("d1", "The price is 5 dollars.", 0.9),))


def _scores(faithfulness: float = 0.9, details: Mapping[str, object] | None = None) -> Scores:
    return Scores({sc.METRIC_FAITHFULNESS: faithfulness, sc.METRIC_ANSWER_RELEVANCY: 0.8,
                   sc.METRIC_CONTEXT_PRECISION: 0.6}, judge="j", details=details or {})


def test_scores_failing_shares_and_verdict_are_recorded():
    recorder, metrics, shares = _recorder()
    recorder.use_youden({sc.METRIC_FAITHFULNESS: 0.8})
    recorder.record(_trace(), _scores(faithfulness=0.2), "j", sc.SAMPLE_STREAM_RATE)
    get = metrics.registry.get_sample_value
    faith = {**LABELS, "metric": sc.METRIC_FAITHFULNESS, "sample": sc.SAMPLE_STREAM_RATE}
    assert get(f"{sc.M_TRACES_SCORED}_total", LABELS) == 1
    assert get(f"{sc.M_SCORE}_sum", faith) == 0.2
    assert get(f"{sc.M_SCORE_FAILURES}_total", faith) == 1
    relevancy = {**faith, "metric": sc.METRIC_ANSWER_RELEVANCY}
    assert get(f"{sc.M_SCORE_FAILURES}_total", relevancy) == 0  # exists at 0: the share is 0, not absent
    assert get(f"{sc.M_DIAGNOSIS}_total", {"service": "svc", "pipeline": "p",
                                           "verdict": sc.VERDICT_GENERATION}) == 1
    key, failing, youden = shares.seen[0]
    assert key == ("svc", "p") and failing[sc.METRIC_FAITHFULNESS] and not failing[sc.METRIC_ANSWER_RELEVANCY]
    assert youden == {sc.METRIC_FAITHFULNESS: 0.8}
    worst = recorder.worst.snapshot()
    assert [w["trace_id"] for w in worst] == ["a" * 32] and worst[0]["verdict"] == sc.VERDICT_GENERATION
    assert recorder.inspector is not None and recorder.inspector.get("a" * 32) is not None


def test_priority_scores_are_exported_but_not_handed_to_the_sampler():
    recorder, metrics, shares = _recorder()
    recorder.record(_trace(), _scores(), "j", sc.SAMPLE_STREAM_PRIORITY)
    assert shares.seen == []
    assert metrics.registry.get_sample_value(f"{sc.M_SCORE}_count", {
        **LABELS, "metric": sc.METRIC_FAITHFULNESS, "sample": sc.SAMPLE_STREAM_PRIORITY}) == 1


def test_evaluators_are_merged_with_the_judges_scores():
    recorder, metrics, _ = _recorder(EvaluatorSet(parse_evaluators(EVALUATORS)))
    heard: list[tuple[str, Scores, str]] = []
    recorder.listeners.append(lambda trace, scores, verdict: heard.append((trace.trace_id, scores, verdict)))
    recorder.record(_trace(answer="Mail me at someone@example.com"), _scores(), "j", sc.SAMPLE_STREAM_RATE)
    (trace_id, scores, verdict), = heard
    assert trace_id == "a" * 32
    assert scores.custom == {"no_pii": 0.0} and scores.values[sc.METRIC_FAITHFULNESS] == 0.9
    assert sc.DETAIL_EVALUATORS in scores.details
    assert verdict == sc.VERDICT_GENERATION  # the evaluator's role blames the answer
    assert metrics.registry.get_sample_value(f"{sc.M_DIAGNOSIS}_total", {
        "service": "svc", "pipeline": "p", "verdict": sc.VERDICT_GENERATION}) == 1


def test_the_same_merge_as_ragmon_eval():
    """``ragmon eval``'s rows and the agent's judged traces take the evaluators' scores from one call."""
    evaluators = EvaluatorSet(parse_evaluators(EVALUATORS))
    trace = _trace(answer="Mail me at someone@example.com")
    merged, results = evaluators.merge(trace, _scores())
    recorder, _, _ = _recorder(evaluators)
    heard: list[Scores] = []
    recorder.listeners.append(lambda t, scores, verdict: heard.append(scores))
    recorder.record(trace, _scores(), "j", sc.SAMPLE_STREAM_RATE)
    assert heard == [merged] and results.scores == {"no_pii": 0.0}
    alone, _ = evaluators.merge(trace, None)  # a row without a judge: the evaluators' scores alone
    assert alone.values == {} and alone.custom == {"no_pii": 0.0}


def test_contradicting_answers_are_counted_and_a_listener_bug_is_contained():
    recorder, metrics, _ = _recorder()

    def broken(trace: RagTrace, scores: Scores, verdict: str) -> None:
        raise RuntimeError("a user's listener")

    recorder.listeners.append(broken)
    claims = {sc.DETAIL_CLAIM_VERDICTS: [{"claim": "It costs 6 dollars.", "verdict": CONTRADICTED}]}
    recorder.record(_trace("b" * 32), _scores(details=claims), "j", sc.SAMPLE_STREAM_RATE)
    recorder.record(_trace("c" * 32), _scores(details={sc.DETAIL_CLAIM_VERDICTS: []}), "j", sc.SAMPLE_STREAM_RATE)
    recorder.record(_trace("d" * 32), _scores(), "j", sc.SAMPLE_STREAM_RATE)  # no claim verdicts: not checked
    labels = {**LABELS, "sample": sc.SAMPLE_STREAM_RATE}
    get = metrics.registry.get_sample_value
    assert get(f"{sc.M_ANSWERS_CHECKED}_total", labels) == 2
    assert get(f"{sc.M_ANSWERS_CONTRADICTING}_total", labels) == 1
    assert get(f"{sc.M_TRACES_SCORED}_total", LABELS) == 3


def test_no_context_is_its_own_verdict():
    recorder, metrics, _ = _recorder()
    recorder.no_context(_trace())
    assert metrics.registry.get_sample_value(f"{sc.M_DIAGNOSIS}_total", {
        "service": "svc", "pipeline": "p", "verdict": sc.VERDICT_NO_CONTEXT}) == 1
    assert recorder.inspector is not None
    shown = recorder.inspector.get("a" * 32)
    assert shown is not None and shown["verdict"] == sc.VERDICT_NO_CONTEXT
