"""``ragmon eval`` end to end: the real CLI entry point, real files, the real gate and JUnit output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from junitparser import Failure, JUnitXml, Skipped

from ragmon import semconv as sc
from ragmon.cli import main
from ragmon.evaluation.command import EXIT_GATE_FAILED, EXIT_PASSED, EXIT_USAGE
from ragmon.testing import StaticJudge, assert_gate, evaluate

N = 40


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _golden(tmp: Path) -> Path:
    rows = [{"id": f"q{i}", "question": f"question {i}?", "ground_truth_docs": [f"g{i}"],
             "ground_truth_answer": f"answer {i}.", "question_type": "factoid",
             "difficulty": ("easy", "medium", "hard")[i % 3]} for i in range(N)]
    return _write_jsonl(tmp / "golden.jsonl", rows)


def _responses(tmp: Path, name: str, second_rank: set[int]) -> Path:
    """Gold document at rank 1 (reciprocal rank 1) or, for ``second_rank``, at rank 2 (0.5)."""
    rows = []
    for i in range(N):
        ids = ["x", f"g{i}"] if i in second_rank else [f"g{i}", "x"]
        rows.append({"id": f"q{i}", "retrieved_ids": ids, "contexts": [f"text {d}" for d in ids],
                     "answer": f"answer {i}.", "latency_s": {"retrieval": 0.01 * (i % 5), "pipeline": 0.2}})
    return _write_jsonl(tmp / f"{name}.jsonl", rows)


def _eval(tmp: Path, responses: Path, *extra: str, out: str = "report.json") -> tuple[int, dict[str, Any]]:
    code = main(["eval", str(_golden(tmp)), "--responses", str(responses), "--judge", "none", "--no-progress",
                 "--quiet", "--out", str(tmp / out), *extra])
    report = json.loads((tmp / out).read_text()) if (tmp / out).exists() else {}
    return code, report


BASELINE_SECOND = set(range(10))  # baseline: q0-q9 at rank 2 -> mrr (30 + 5) / 40 = 0.875


def test_report_has_the_documented_shape_and_exact_metrics(tmp_path: Path) -> None:
    code, report = _eval(tmp_path, _responses(tmp_path, "base", BASELINE_SECOND))
    assert code == EXIT_PASSED
    assert report["questions"] == N
    assert report["metrics"]["mrr"]["mean"] == pytest.approx(0.875)
    lo, hi = report["metrics"]["mrr"]["ci95"]
    assert lo < 0.875 < hi
    assert report["metrics"]["hit@1"]["mean"] == pytest.approx(30 / 40)
    assert report["metrics"]["recall@5"]["mean"] == 1.0
    assert report["metrics"]["ndcg@10"]["mean"] == pytest.approx((30 + 10 / 1.584962500721156) / 40)
    assert report["metrics"]["precision@5"]["mean"] == pytest.approx(0.2)
    assert report["primary_metric"]["factoid"] == "mrr"
    assert set(report["by_difficulty"]) == {"easy", "medium", "hard"}
    assert report["by_question_type"]["factoid"]["questions"] == N
    assert report["latency"]["pipeline_p95_s"] == pytest.approx(0.2)
    assert report["rows"][0]["retrieved_ids"] == ["x", "g0"]
    assert report["gate"]["passed"] is True
    rules = {r["rule"]: r["status"] for r in report["gate"]["rules"]}
    assert rules["retrieval_p95_s > 0.5"] == "passed"
    assert rules["faithfulness drop > 0.08"] == "skipped"  # no baseline, no judge


def test_worse_run_fails_with_exit_1_and_a_readable_junit_file(tmp_path: Path) -> None:
    _eval(tmp_path, _responses(tmp_path, "base", BASELINE_SECOND), out="base.json")
    worse = _responses(tmp_path, "worse", set(range(N)))  # every gold doc at rank 2: mrr 0.5
    junit = tmp_path / "eval.xml"
    code, report = _eval(tmp_path, worse, "--baseline", str(tmp_path / "base.json"), "--fail-if",
                         "mrr drop > 0.05", "--fail-if", "hit@1 < 0.9", "--junit", str(junit),
                         "--markdown", str(tmp_path / "eval.md"))
    assert code == EXIT_GATE_FAILED
    assert report["gate"]["passed"] is False
    assert report["baseline"]["deltas"]["mrr"]["delta"] == pytest.approx(0.5 - 0.875)
    assert report["baseline"]["shared_questions"] == N
    xml = JUnitXml.fromfile(str(junit))
    suites = {suite.name: suite for suite in xml}
    gate_cases = {case.name: case for case in suites["gate"]}
    failed = {name for name, case in gate_cases.items() if any(isinstance(r, Failure) for r in case.result)}
    assert any("mrr drop > 0.05" in name for name in failed)
    assert any("hit@1 < 0.9" in name for name in failed)
    assert any(any(isinstance(r, Skipped) for r in case.result) for case in gate_cases.values())  # faithfulness
    assert "❌" in (tmp_path / "eval.md").read_text() or "FAIL" in (tmp_path / "eval.md").read_text().upper()


def test_equal_run_passes_against_its_baseline(tmp_path: Path) -> None:
    responses = _responses(tmp_path, "base", BASELINE_SECOND)
    _eval(tmp_path, responses, out="base.json")
    code, report = _eval(tmp_path, responses, "--baseline", str(tmp_path / "base.json"), "--fail-if",
                         "mrr drop > 0.0")
    assert code == EXIT_PASSED
    assert report["baseline"]["deltas"]["mrr"]["delta"] == 0.0


def test_small_noisy_drop_fails_only_without_significance(tmp_path: Path) -> None:
    _eval(tmp_path, _responses(tmp_path, "base", BASELINE_SECOND), out="base.json")
    # 7 questions improve (q0-q6 to rank 1), 10 get worse (q10-q19 to rank 2): mean delta -0.0375
    noisy = _responses(tmp_path, "noisy", {7, 8, 9, *range(10, 20)})
    args = ("--baseline", str(tmp_path / "base.json"), "--no-default-rules", "--fail-if", "mrr drop > 0.03")
    code, report = _eval(tmp_path, noisy, *args, out="plain.json")
    assert code == EXIT_GATE_FAILED
    assert report["baseline"]["deltas"]["mrr"]["delta"] == pytest.approx(-0.0375)
    code, report = _eval(tmp_path, noisy, *args, "--significance", "0.05", out="significant.json")
    assert code == EXIT_PASSED, report["gate"]
    (rule,) = report["gate"]["rules"]
    assert rule["p_value"] > 0.05 and "not significant" in rule["message"]


def test_a_real_drop_is_significant(tmp_path: Path) -> None:
    _eval(tmp_path, _responses(tmp_path, "base", BASELINE_SECOND), out="base.json")
    code, report = _eval(tmp_path, _responses(tmp_path, "worse", set(range(N))), "--baseline",
                         str(tmp_path / "base.json"), "--no-default-rules", "--fail-if", "mrr drop > 0.03",
                         "--significance", "0.05")
    assert code == EXIT_GATE_FAILED
    assert report["gate"]["rules"][0]["p_value"] < 0.01


@pytest.mark.parametrize(
    "args",
    [
        ["eval", "/nonexistent/golden.jsonl", "--responses", "/nonexistent/r.jsonl", "--judge", "none"],
        ["eval", "{golden}", "--responses", "{responses}", "--judge", "none", "--fail-if", "recall@5 is bad"],
        ["eval", "{golden}", "--responses", "{responses}", "--judge", "none", "--baseline", "{golden}"],
        ["eval", "{golden}", "--responses", "{responses}", "--judge", "none", "--k", "1,3", "--primary-k", "5"],
    ],
)
def test_bad_usage_exits_2(tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    golden, responses = _golden(tmp_path), _responses(tmp_path, "r", set())
    argv = [a.format(golden=golden, responses=responses) for a in args]
    assert main([*argv, "--no-progress", "--quiet"]) == EXIT_USAGE
    assert "ragmon eval:" in capsys.readouterr().err


def test_unknown_and_missing_response_ids_are_reported_and_the_rest_evaluated(tmp_path: Path) -> None:
    responses = _responses(tmp_path, "r", set())
    lines = responses.read_text().splitlines()
    lines = [*lines[:-1], '{"id": "nope", "retrieved_ids": ["a"], "contexts": ["a"], "answer": "a"}', "{broken"]
    responses.write_text("\n".join(lines) + "\n")
    code, report = _eval(tmp_path, responses)
    assert code == EXIT_PASSED
    assert report["questions"] == N - 1
    assert report["problems"]["by_reason"] == {"missing_response": 1, "malformed_response": 1, "unknown_id": 1}
    missing = [r for r in report["rows"] if r["problem"]]
    assert [r["id"] for r in missing] == [f"q{N - 1}"]
    assert report["metrics"]["mrr"]["n"] == N - 1


def test_app_in_process_with_a_judge_and_failing_rows(tmp_path: Path) -> None:
    rows = [
        {"id": "ok1", "question": "what about doc:a doc:b", "ground_truth_docs": ["a"]},
        {"id": "ok2", "question": "and doc:c", "ground_truth_docs": {"c": 2, "d": 1}},
        {"id": "boom", "question": "explode doc:a", "ground_truth_docs": ["a"]},
        {"id": "hop", "question": "doc:x doc:q", "ground_truth_docs": ["x", "y"], "question_type": "multi_hop",
         "hops": [["x"], ["y"]]},
    ]
    golden = _write_jsonl(tmp_path / "golden.jsonl", rows)
    judge = StaticJudge({sc.METRIC_FAITHFULNESS: 0.9, sc.METRIC_ANSWER_RELEVANCY: 0.8,
                         sc.METRIC_CONTEXT_PRECISION: 0.2})
    report = evaluate(golden, "tests.evaluation.apps.rag_apps:flaky_async", judge=judge, timeout_s=10)
    by_id = {r["id"]: r for r in report["rows"]}
    assert by_id["boom"]["problem"]["reason"] == "app_error"
    assert report["questions"] == 3
    assert by_id["ok1"]["retrieved_ids"] == ["a", "b"]
    assert by_id["ok1"]["metrics"]["mrr"] == 1.0
    assert by_id["ok2"]["metrics"]["ndcg@10"] == pytest.approx(2 / (2 + 1 / 1.584962500721156))
    assert by_id["hop"]["miss_class"] == "hop2_miss"
    assert report["multi_hop_misses"]["hop2_miss"] == 1
    # the judge's low context precision diagnoses retrieval, on every judged row
    assert {by_id[i]["verdict"] for i in ("ok1", "ok2", "hop")} == {sc.VERDICT_RETRIEVAL}
    assert len(judge.seen) == 3
    assert_gate(report, "mrr < 0.5")
    with pytest.raises(AssertionError, match=r"two_hop_recall@5 < 0\.5"):
        assert_gate(report, "two_hop_recall@5 < 0.5")
    with pytest.raises(AssertionError, match="recal@5"):
        assert_gate(report, "recal@5 < 0.5")  # a typo is an error, never a pass
