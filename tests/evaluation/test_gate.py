"""Gate rules: parsing, absolute and drop rules, significance, skipped metrics, severities."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragmon.evaluation import gate
from ragmon.evaluation.gate import GateRuleError, RunMetrics, evaluate_gate, parse_rule

# --- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "metric", "kind", "op", "threshold"),
    [
        ("recall@5 < 0.85", "recall@5", "absolute", "<", 0.85),
        ("retrieval_p95_s > 0.5", "retrieval_p95_s", "absolute", ">", 0.5),
        ("faithfulness drop > 0.08", "faithfulness", "drop", ">", 0.08),
        ("  ndcg@10<=.5 ", "ndcg@10", "absolute", "<=", 0.5),
        ("composite   drop>=5e-2", "composite", "drop", ">=", 0.05),
        ("mrr >= 1", "mrr", "absolute", ">=", 1.0),
        ("dropout > 0.1", "dropout", "absolute", ">", 0.1),
        ("delta < -0.5", "delta", "absolute", "<", -0.5),
    ],
)
def test_parse(text: str, metric: str, kind: str, op: str, threshold: float) -> None:
    rule = parse_rule(text)
    assert (rule.metric, rule.kind, rule.op, rule.threshold, rule.severity) == (metric, kind, op, threshold, "fail")
    assert parse_rule(rule.text) == rule  # the normalised text parses back to the same rule


def test_normalised_text() -> None:
    assert parse_rule("faithfulness drop>0.08").text == "faithfulness drop > 0.08"
    assert parse_rule("recall@5<0.85", severity="warn").severity == "warn"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "recall@5",
        "recall@5 < ",
        "recall@5 == 0.8",
        "recall@5 < abc",
        "recall@5 < 0.8 extra",
        "< 0.8",
        "5recall < 0.8",
        "faithfulness drop < 0.08",
        "faithfulness rise > 0.08",
        "recall@5 < 1e999",
    ],
)
def test_bad_rules_raise_a_clear_value_error(text: str) -> None:
    with pytest.raises(GateRuleError, match="rule") as info:
        parse_rule(text)
    assert isinstance(info.value, ValueError)
    assert repr(text) in str(info.value)


def test_unknown_severity() -> None:
    with pytest.raises(GateRuleError, match="severity"):
        parse_rule("mrr < 0.5", severity="critical")


def test_defaults_keep_the_seeds_steps_and_fail_large_significant_drops() -> None:
    assert [(r.text, r.severity) for r in gate.DEFAULT_RULES] == [
        ("composite drop > 0.05", "warn"),
        ("faithfulness drop > 0.08", "fail"),
        ("retrieval_p95_s > 0.5", "fail"),
        ("composite drop > 0.1 (p < 0.05)", "fail"),
        ("recall@5 drop > 0.1 (p < 0.05)", "fail"),
        ("context_precision drop > 0.1 (p < 0.05)", "fail"),
    ]
    assert gate.default_rules(10)[4].text == "recall@10 drop > 0.1 (p < 0.05)"


def test_direction_of_metrics() -> None:
    assert gate.higher_is_better("recall@5") and gate.higher_is_better("faithfulness")
    assert not gate.higher_is_better("retrieval_p95_s") and not gate.higher_is_better("latency_seconds")


# --- evaluation ------------------------------------------------------------------------------


def run(values: dict[str, np.ndarray], aggregates: dict[str, float | None] | None = None) -> RunMetrics:
    n = len(next(iter(values.values())))
    rows = {f"q{i}": {metric: float(column[i]) for metric, column in values.items()} for i in range(n)}
    return RunMetrics(per_question=rows, aggregates=aggregates or {})


RNG = np.random.default_rng(2024)
N = 200
BASE = {
    "recall@5": RNG.binomial(1, 0.9, N).astype(float),
    "faithfulness": np.clip(RNG.normal(0.85, 0.1, N), 0, 1),
    "composite": np.clip(RNG.normal(0.8, 0.1, N), 0, 1),
}
BASELINE = run(BASE, {"retrieval_p95_s": 0.3})


def by_rule(result: gate.GateResult) -> dict[str, gate.RuleOutcome]:
    return {o.rule: o for o in result.rules}


def test_equal_run_passes_every_default_rule() -> None:
    result = evaluate_gate(gate.DEFAULT_RULES, run(BASE, {"retrieval_p95_s": 0.3}), BASELINE, significance=0.05)
    assert result.passed
    # context precision is not in these runs: its rule is skipped, every other one passes
    assert [o.status for o in result.rules] == ["passed"] * 5 + ["skipped"]
    faith = result.rules[1]
    assert faith.delta == 0.0 and faith.p_value == 1.0 and faith.n == N
    assert faith.observed == pytest.approx(BASE["faithfulness"].mean())


def test_worse_run_fails() -> None:
    worse = dict(BASE, faithfulness=BASE["faithfulness"] - 0.15, composite=BASE["composite"] - 0.1)
    result = evaluate_gate(gate.DEFAULT_RULES, run(worse, {"retrieval_p95_s": 0.7}), BASELINE, significance=0.05)
    assert not result.passed
    composite, faith, p95 = result.rules[:3]
    assert composite.status == "warned"  # severity warn: reported, does not fail the gate
    assert faith.status == "failed"
    assert faith.delta == pytest.approx(-0.15) and faith.p_value is not None and faith.p_value < 0.01
    assert faith.ci95 is not None and faith.ci95[1] < 0
    assert "faithfulness" in faith.message and "0.15" in faith.message
    assert p95.status == "failed" and p95.observed == 0.7 and p95.baseline == 0.3 and p95.n is None


def test_warn_only_does_not_fail_the_gate() -> None:
    worse = dict(BASE, composite=BASE["composite"] - 0.1)
    result = evaluate_gate(gate.DEFAULT_RULES, run(worse, {"retrieval_p95_s": 0.3}), BASELINE)
    assert result.passed
    assert [o.status for o in result.rules] == ["warned", "passed", "passed", "passed", "passed", "skipped"]
    fail_rule = parse_rule("composite drop > 0.05", severity="fail")
    assert not evaluate_gate([fail_rule], run(worse), BASELINE).passed


def test_small_noisy_drop_fails_only_without_significance() -> None:
    rng = np.random.default_rng(77)
    n = 30
    base = rng.random(n)
    noise = rng.normal(0.0, 0.4, n)
    current = base + noise - noise.mean() - 0.06  # mean drop exactly 0.06 > 0.05, very noisy
    rule = [parse_rule("composite drop > 0.05")]
    cur, old = run({"composite": current}), run({"composite": base})
    plain = evaluate_gate(rule, cur, old)
    assert not plain.passed and plain.rules[0].status == "failed"
    assert plain.rules[0].delta == pytest.approx(-0.06)
    tested = evaluate_gate(rule, cur, old, significance=0.05)
    assert tested.passed and tested.rules[0].status == "passed"
    outcome = tested.rules[0]
    assert outcome.p_value is not None and outcome.p_value >= 0.05
    assert "not significant" in outcome.message


def test_absolute_rule() -> None:
    rule = parse_rule("recall@5 < 0.85")
    good = evaluate_gate([rule], run({"recall@5": np.full(10, 0.9)}))
    assert good.passed and good.rules[0].observed == pytest.approx(0.9)
    bad = evaluate_gate([rule], run({"recall@5": np.full(10, 0.8)}))
    assert not bad.passed and bad.rules[0].status == "failed"
    assert bad.rules[0].ci95 == pytest.approx((0.8, 0.8)) and bad.rules[0].n == 10
    exact = evaluate_gate([rule], run({"recall@5": np.full(10, 0.85)}))
    assert exact.passed  # "< 0.85" does not hold at 0.85


def test_float_slack_on_the_threshold() -> None:
    # 0.80 - 0.75 == 0.05000000000000004 in floating point: not a drop "> 0.05"
    result = evaluate_gate(
        [parse_rule("mrr drop > 0.05")], run({"mrr": np.full(5, 0.75)}), run({"mrr": np.full(5, 0.80)})
    )
    assert result.passed


def test_latency_drop_means_an_increase() -> None:
    rule = [parse_rule("retrieval_p95_s drop > 0.1")]
    slower = evaluate_gate(rule, RunMetrics(aggregates={"retrieval_p95_s": 0.5}), BASELINE)
    assert not slower.passed and slower.rules[0].delta == pytest.approx(0.2)
    faster = evaluate_gate(rule, RunMetrics(aggregates={"retrieval_p95_s": 0.1}), BASELINE)
    assert faster.passed
    # an aggregate-only metric has no per-question pairs: under significance it cannot fail
    untested = evaluate_gate(rule, RunMetrics(aggregates={"retrieval_p95_s": 0.5}), BASELINE, significance=0.05)
    assert untested.passed and "cannot be tested" in untested.rules[0].message


def test_per_question_latency_drop() -> None:
    base = run({"latency_s": np.full(20, 0.2)})
    slower = run({"latency_s": np.full(20, 0.5)})
    result = evaluate_gate([parse_rule("latency_s drop > 0.1")], slower, base, significance=0.05)
    assert not result.passed and result.rules[0].delta == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("rules", "current", "baseline", "reason"),
    [
        (["answer_correctness < 0.5"], run(BASE), None, "not in this run"),
        (["retrieval_p95_s > 0.5"], run(BASE), None, "not in this run"),
        (["faithfulness drop > 0.08"], run(BASE), None, "no baseline"),
        (["answer_correctness drop > 0.08"], run(BASE), BASELINE, "not in this run"),
        (["faithfulness drop > 0.08"], run(BASE), RunMetrics(aggregates={"x": 1.0}), "not in the baseline"),
    ],
)
def test_missing_metrics_are_skipped(
    rules: list[str], current: RunMetrics, baseline: RunMetrics | None, reason: str
) -> None:
    result = evaluate_gate([parse_rule(text) for text in rules], current, baseline)
    assert result.passed
    assert result.rules[0].status == "skipped" and reason in result.rules[0].message


def test_no_shared_ids_is_skipped_and_none_values_ignored() -> None:
    current = RunMetrics(per_question={"a": {"mrr": 0.1}, "b": {"mrr": None}})
    baseline = RunMetrics(per_question={"b": {"mrr": 1.0}, "c": {"mrr": 1.0}})
    result = evaluate_gate([parse_rule("mrr drop > 0.05")], current, baseline)
    assert result.rules[0].status == "skipped" and "both runs" in result.rules[0].message
    absolute = evaluate_gate([parse_rule("mrr < 0.5")], current)
    assert absolute.rules[0].observed == pytest.approx(0.1) and absolute.rules[0].n == 1


def test_drop_is_paired_over_shared_ids() -> None:
    baseline = RunMetrics(per_question={"a": {"mrr": 1.0}, "b": {"mrr": 0.5}, "c": {"mrr": 0.0}})
    # c is new and scores 0, but on the shared ids nothing changed: no drop
    current = RunMetrics(per_question={"a": {"mrr": 1.0}, "b": {"mrr": 0.5}, "d": {"mrr": 0.0}})
    outcome = evaluate_gate([parse_rule("mrr drop > 0.05")], current, baseline).rules[0]
    assert outcome.status == "passed" and outcome.n == 2 and outcome.delta == 0.0


def test_significance_must_be_a_probability() -> None:
    with pytest.raises(ValueError, match="significance"):
        evaluate_gate(gate.DEFAULT_RULES, run(BASE), BASELINE, significance=1.5)


def test_to_dict_is_json_ready() -> None:
    worse = dict(BASE, faithfulness=BASE["faithfulness"] - 0.15)
    result = evaluate_gate(gate.DEFAULT_RULES, run(worse, {"retrieval_p95_s": 0.3}), BASELINE)
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["passed"] is False
    assert [r["status"] for r in data["rules"]] == ["passed", "failed", "passed", "passed", "passed", "skipped"]
    faith = data["rules"][1]
    assert set(faith) >= {
        "rule", "metric", "kind", "threshold", "severity", "status", "observed", "baseline",
        "delta", "ci95", "p_value", "message",
    }  # fmt: skip
    assert faith["rule"] == "faithfulness drop > 0.08" and faith["kind"] == "drop" and len(faith["ci95"]) == 2


def test_deterministic() -> None:
    worse = run(dict(BASE, faithfulness=BASE["faithfulness"] - 0.05))
    assert evaluate_gate(gate.DEFAULT_RULES, worse, BASELINE) == evaluate_gate(gate.DEFAULT_RULES, worse, BASELINE)


# --- composite -------------------------------------------------------------------------------


def test_composite_score() -> None:
    row = {"mrr": 0.5, "recall@5": 1.0, "faithfulness": 1.0, "answer_relevancy": None, "context_precision": 0.0}
    assert gate.composite_score(row, "factoid") == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert gate.composite_score(row, "summary") == pytest.approx((1.0 + 1.0 + 0.0) / 3)
    assert gate.composite_score({"two_hop_recall@10": 0.0, "faithfulness": 1.0}, "multi_hop", k=10) == 0.5
    assert gate.composite_score({"mrr": 1.0, "abstention": 0.0}, "no_answer") == 0.0  # no retrieval part
    assert gate.composite_score({"hit@1": 1.0}, "summary") is None
