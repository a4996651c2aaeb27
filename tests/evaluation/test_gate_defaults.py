"""The default gate stops a broken release and lets a healthy re-run through.

The collapse is the one a user met (issue 26): a retriever that returns articles on another topic,
recall@5 1.0 -> 0.0, composite 0.96 -> 0.23, p = 0.001 — which the seeds' rules alone passed.
Each default fail rule is shown failing (a large, significant drop), and passing (a drop under its
threshold; a large drop that the paired test cannot tell from noise).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragmon.cli import main
from ragmon.evaluation import gate
from ragmon.evaluation.command import EXIT_GATE_FAILED, EXIT_PASSED
from ragmon.evaluation.gate import GateRuleError, RunMetrics, evaluate_gate, parse_rule
from ragmon.evaluation.run import parse_rules

NEW_FAIL_RULES = (
    "composite drop > 0.1 (p < 0.05)",
    "recall@5 drop > 0.1 (p < 0.05)",
    "context_precision drop > 0.1 (p < 0.05)",
)
Rows = dict[str, dict[str, float | None]]  # row id -> metric -> value
SEEDS_RULES = gate.DEFAULT_RULES[:3]  # what the gate had before: composite warns, faithfulness, latency


def statuses(result: gate.GateResult) -> dict[str, str]:
    return {o.rule: o.status for o in result.rules}


def with_composite(rows: Rows) -> RunMetrics:
    """Rows as the runner stores them: each with its composite (primary metric mrr: factoid)."""
    for row in rows.values():
        row["composite"] = gate.composite_score(row, "factoid")
    return RunMetrics(per_question=rows, aggregates={"retrieval_p95_s": 0.05})


def healthy_rows(n: int, rng: np.random.Generator) -> Rows:
    return {
        f"q{i}": {
            "recall@5": 1.0, "mrr": 1.0,
            "faithfulness": float(rng.uniform(0.9, 1.0)), "answer_relevancy": float(rng.uniform(0.9, 1.0)),
            "context_precision": float(rng.uniform(0.9, 1.0)), "answer_correctness": float(rng.uniform(0.85, 1.0)),
        }
        for i in range(n)
    }  # fmt: skip


def collapsed(rows: Rows, rng: np.random.Generator) -> Rows:
    """Articles on another topic: no gold document, contexts irrelevant, the answer faithful to them
    (the template answers from what it got) but no answer to the question."""
    return {
        row_id: {
            "recall@5": 0.0, "mrr": 0.0, "faithfulness": row["faithfulness"],
            "answer_relevancy": float(rng.uniform(0.0, 0.12)), "context_precision": float(rng.uniform(0.0, 0.1)),
            "answer_correctness": float(rng.uniform(0.05, 0.25)),
        }
        for row_id, row in rows.items()
    }  # fmt: skip


def test_the_collapse_from_the_issue_fails_the_default_gate() -> None:
    rng = np.random.default_rng(26)
    base = healthy_rows(20, rng)
    broken = collapsed(base, rng)
    baseline, current = with_composite(base), with_composite(broken)
    assert np.mean(list(baseline.column("composite").values())) == pytest.approx(0.96, abs=0.01)
    assert np.mean(list(current.column("composite").values())) == pytest.approx(0.23, abs=0.02)

    # the seeds' rules alone: only a warning — the bug the issue reports
    assert evaluate_gate(SEEDS_RULES, current, baseline).passed

    result = evaluate_gate(gate.DEFAULT_RULES, current, baseline)
    assert not result.passed
    found = statuses(result)
    assert found["composite drop > 0.05"] == "warned"
    assert found["faithfulness drop > 0.08"] == "passed"  # the answer is faithful to the wrong articles
    assert all(found[rule] == "failed" for rule in NEW_FAIL_RULES), found
    recall = next(o for o in result.rules if o.rule == "recall@5 drop > 0.1 (p < 0.05)")
    assert (recall.baseline, recall.observed, recall.n) == (1.0, 0.0, 20)
    assert recall.p_value == pytest.approx(2 / 2001) and recall.significance == 0.05
    assert "p = 0.001" in recall.message


def noisy_rerun(rows: Rows, rng: np.random.Generator) -> Rows:
    """The same release again: generation scores jitter by a few hundredths either way, and two
    questions' gold documents fall out of the top 5 while one comes back."""
    out: Rows = {}
    for i, (row_id, row) in enumerate(rows.items()):
        new = {k: (float(np.clip(v + rng.normal(0.0, 0.04), 0.0, 1.0)) if v is not None and k not in ("recall@5", "mrr")
                   else v) for k, v in row.items()}  # fmt: skip
        if i in (3, 11):
            new["recall@5"], new["mrr"] = 0.0, 0.0
        out[row_id] = new
    return out


@pytest.mark.parametrize("seed", range(10))
def test_a_healthy_rerun_passes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    base = healthy_rows(46, rng)
    base["q20"]["recall@5"] = base["q20"]["mrr"] = 0.0  # the one that comes back in the re-run
    baseline, current = with_composite(base), with_composite(noisy_rerun(base, rng))
    result = evaluate_gate(gate.DEFAULT_RULES, current, baseline)
    assert result.passed, [o.message for o in result.rules if o.status != "passed"]
    assert all(status == "passed" for status in statuses(result).values())


def _pair(metric: str, base: list[float], cur: list[float]) -> tuple[RunMetrics, RunMetrics]:
    rows = lambda values: {f"q{i}": {metric: v} for i, v in enumerate(values)}  # noqa: E731
    return RunMetrics(per_question=rows(cur)), RunMetrics(per_question=rows(base))


NOISY_BASE = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
NOISY_CUR = [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]  # four lose, two gain: mean drop 0.2


@pytest.mark.parametrize("text", NEW_FAIL_RULES)
def test_each_new_default_rule_can_fail_and_pass(text: str) -> None:
    rule = next(r for r in gate.DEFAULT_RULES if r.text == text)
    assert rule.severity == "fail" and rule.significance == 0.05
    base = [0.9] * 30

    # fails: every question 0.3 lower
    current, baseline = _pair(rule.metric, base, [0.6] * 30)
    (outcome,) = evaluate_gate([rule], current, baseline).rules
    assert outcome.status == "failed" and outcome.delta == pytest.approx(-0.3) and outcome.p_value < 0.05

    # passes: a significant drop, but under the threshold
    current, baseline = _pair(rule.metric, base, [0.85] * 30)
    (outcome,) = evaluate_gate([rule], current, baseline).rules
    assert outcome.status == "passed" and outcome.p_value < 0.05 and "not reached" in outcome.message

    # passes: a drop over the threshold that the paired test cannot tell from noise
    current, baseline = _pair(rule.metric, NOISY_BASE, NOISY_CUR)
    (outcome,) = evaluate_gate([rule], current, baseline).rules
    assert outcome.delta == pytest.approx(-0.2)
    assert outcome.status == "passed" and outcome.p_value >= 0.05 and "not significant" in outcome.message
    # ... which the same rule without its test would fail
    untested = parse_rule(text.split(" (")[0])
    assert evaluate_gate([untested], current, baseline).rules[0].status == "failed"


# --- the rule's own test: grammar and levels ------------------------------------------------


@pytest.mark.parametrize(
    ("text", "alpha"),
    [
        ("mrr drop > 0.1 (p < 0.05)", 0.05),
        ("mrr drop>0.1(p<0.01)", 0.01),
        ("  mrr drop >= .1 ( p < 5e-2 ) ", 0.05),
        ("mrr drop > 0.1", None),
    ],
)
def test_a_drop_rule_may_carry_its_own_test(text: str, alpha: float | None) -> None:
    rule = parse_rule(text)
    assert rule.kind == "drop" and rule.significance == alpha
    assert parse_rule(rule.text) == rule


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("mrr < 0.5 (p < 0.05)", "belongs to a drop rule"),
        ("mrr drop > 0.1 (p < 1.5)", "between 0 and 1"),
        ("mrr drop > 0.1 (p < 0)", "between 0 and 1"),
        ("mrr drop > 0.1 (p > 0.05)", "cannot parse"),
        ("mrr drop > 0.1 (p < 0.05", "cannot parse"),
    ],
)
def test_a_bad_test_is_a_clear_error(text: str, why: str) -> None:
    with pytest.raises(GateRuleError, match=why):
        parse_rule(text)


def test_the_stricter_level_applies_when_the_run_sets_one_too() -> None:
    rng = np.random.default_rng(5)
    base = rng.uniform(0.5, 1.0, 40)
    cur = base - 0.15 + rng.normal(0.0, 0.5, 40)  # drop 0.157, p = 0.039
    current, baseline = _pair("mrr", list(base), list(cur))
    rule = parse_rule("mrr drop > 0.1 (p < 0.05)")
    alone = evaluate_gate([rule], current, baseline).rules[0]
    assert 0.01 < alone.p_value < 0.05 and alone.status == "failed" and alone.significance == 0.05
    stricter = evaluate_gate([rule], current, baseline, significance=0.01).rules[0]
    assert stricter.status == "passed" and stricter.significance == 0.01 and "not significant" in stricter.message
    looser = evaluate_gate([rule], current, baseline, significance=0.2).rules[0]
    assert looser.significance == 0.05 and looser.status == "failed"


def test_a_users_rule_replaces_the_default_of_the_same_metric_kind_and_severity() -> None:
    texts = [r.text for r in parse_rules(["composite drop > 0.2"], [], defaults=True)]
    assert "composite drop > 0.1 (p < 0.05)" not in texts  # the failing default is replaced ...
    assert "composite drop > 0.05" in texts and texts[-1] == "composite drop > 0.2"  # ... the warning kept
    texts = [r.text for r in parse_rules([], ["composite drop > 0.03"], defaults=True)]
    assert "composite drop > 0.05" not in texts and "composite drop > 0.1 (p < 0.05)" in texts
    assert [r.text for r in parse_rules(["mrr < 0.5"], [], defaults=False)] == ["mrr < 0.5"]
    assert "recall@10 drop > 0.1 (p < 0.05)" in [r.text for r in parse_rules([], [], True, primary_k=10)]


# --- end to end: `ragmon eval` exit codes ----------------------------------------------------

N = 20


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _responses(tmp: Path, name: str, retrieved: list[list[str]]) -> Path:
    return _write(tmp / f"{name}.jsonl", [
        {"id": f"q{i}", "retrieved_ids": ids, "contexts": [f"text of {d}" for d in ids], "answer": f"answer {i}.",
         "latency_s": {"retrieval": 0.02, "pipeline": 0.1}}
        for i, ids in enumerate(retrieved)
    ])  # fmt: skip


def _eval(tmp: Path, responses: Path, out: str, *extra: str) -> tuple[int, dict[str, Any]]:
    golden = _write(tmp / "golden.jsonl", [{"id": f"q{i}", "question": f"question {i}?",
                                            "ground_truth_docs": [f"g{i}"]} for i in range(N)])
    code = main(["eval", str(golden), "--responses", str(responses), "--judge", "none", "--no-progress",
                 "--quiet", "--out", str(tmp / out), *extra])
    return code, json.loads((tmp / out).read_text())


def test_ragmon_eval_exits_1_on_the_collapse_and_0_on_a_noisy_rerun(tmp_path: Path) -> None:
    healthy = [[f"g{i}", "x1", "x2"] for i in range(N)]
    code, _ = _eval(tmp_path, _responses(tmp_path, "healthy", healthy), "base.json")
    assert code == EXIT_PASSED
    baseline = ("--baseline", str(tmp_path / "base.json"))

    # another topic's articles: no gold document anywhere in the list
    off_topic = [[f"g{(i + 7) % N}", "x1", "x2"] for i in range(N)]
    code, report = _eval(tmp_path, _responses(tmp_path, "broken", off_topic), "broken.json", *baseline)
    assert code == EXIT_GATE_FAILED
    found = {r["rule"]: r for r in report["gate"]["rules"]}
    assert found["recall@5 drop > 0.1 (p < 0.05)"]["status"] == "failed"
    assert found["composite drop > 0.1 (p < 0.05)"]["status"] == "failed"
    assert found["recall@5 drop > 0.1 (p < 0.05)"]["significance"] == 0.05
    assert found["context_precision drop > 0.1 (p < 0.05)"]["status"] == "skipped"  # --judge none

    # a re-run where one gold document slips from rank 1 to rank 3: noise, passes
    noisy = [list(ids) for ids in healthy]
    noisy[4] = ["x1", "x2", "g4"]
    code, report = _eval(tmp_path, _responses(tmp_path, "noisy", noisy), "noisy.json", *baseline)
    assert code == EXIT_PASSED, report["gate"]
    assert {r["status"] for r in report["gate"]["rules"]} <= {"passed", "skipped"}


def test_the_default_recall_rule_follows_the_primary_k(tmp_path: Path) -> None:
    healthy = [[f"g{i}"] for i in range(N)]
    code, report = _eval(tmp_path, _responses(tmp_path, "healthy", healthy), "base.json", "--k", "1,3,10")
    assert code == EXIT_PASSED
    assert "recall@3 drop > 0.1 (p < 0.05)" in {r["rule"] for r in report["gate"]["rules"]}
