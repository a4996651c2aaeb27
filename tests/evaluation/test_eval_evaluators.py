"""``ragmon eval --evaluators``: a report row per declared evaluator, a default fail rule at its
threshold, ``--fail-if`` on it, and a bad file or an llm criterion without the LLM judge as exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragmon.cli import main
from ragmon.evaluation.command import EXIT_GATE_FAILED, EXIT_PASSED, EXIT_USAGE
from ragmon.evaluation.markdown import render_markdown

N = 20
EVALUATORS = """\
evaluators:
  - name: no_pii
    kind: regex
    pattern: '[\\w.+-]+@[\\w-]+\\.[a-z]{2,}'
    pass_when: no_match
    threshold: 1.0
    role: answer
  - name: concise
    kind: heuristic
    check: length
    max_words: 8
    threshold: 0.5
"""


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _run(tmp: Path, leaks: set[int], *extra: str) -> tuple[int, dict[str, Any]]:
    golden = _jsonl(tmp / "golden.jsonl", [
        {"id": f"q{i}", "question": f"question {i}?", "ground_truth_docs": [f"g{i}"],
         "ground_truth_answer": f"answer {i}."} for i in range(N)])
    responses = _jsonl(tmp / "responses.jsonl", [
        {"id": f"q{i}", "retrieved_ids": [f"g{i}"], "contexts": [f"text g{i}"],
         "answer": f"answer {i}, ask jo{i}@example.com." if i in leaks else f"answer {i}."} for i in range(N)])
    (tmp / "evaluators.yaml").write_text(EVALUATORS)
    out = tmp / "report.json"
    code = main(["eval", str(golden), "--responses", str(responses), "--judge", "none", "--no-progress", "--quiet",
                 "--evaluators", str(tmp / "evaluators.yaml"), "--out", str(out), *extra])
    return code, json.loads(out.read_text()) if out.exists() else {}


def test_each_evaluator_is_a_report_row_with_a_default_rule(tmp_path: Path) -> None:
    code, report = _run(tmp_path, set())
    assert code == EXIT_PASSED
    assert report["metrics"]["no_pii"]["mean"] == 1.0 and report["metrics"]["concise"]["mean"] == 1.0
    rules = {r["rule"]: r["status"] for r in report["gate"]["rules"]}
    assert rules["no_pii < 1"] == "passed" and rules["concise < 0.5"] == "passed"
    assert "no_pii" in render_markdown(report)


def test_one_leak_fails_the_default_gate_and_is_blamed_on_generation(tmp_path: Path) -> None:
    code, report = _run(tmp_path, {3})
    assert code == EXIT_GATE_FAILED
    assert report["metrics"]["no_pii"]["mean"] == pytest.approx(19 / 20)
    failed = [r["rule"] for r in report["gate"]["rules"] if r["status"] == "failed"]
    assert failed == ["no_pii < 1"]
    row = next(r for r in report["rows"] if r["id"] == "q3")
    assert row["metrics"]["no_pii"] == 0.0 and row["verdict"] == "generation_failure"


def test_fail_if_on_an_evaluator_replaces_its_default(tmp_path: Path) -> None:
    code, report = _run(tmp_path, {3}, "--fail-if", "no_pii < 0.9")
    assert code == EXIT_PASSED
    assert {r["rule"] for r in report["gate"]["rules"]} >= {"no_pii < 0.9"}
    assert "no_pii < 1" not in {r["rule"] for r in report["gate"]["rules"]}


def test_a_bad_file_and_an_llm_criterion_without_the_llm_judge_exit_2(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("evaluators:\n  - name: x\n    kind: nope\n")
    golden = _jsonl(tmp_path / "g.jsonl", [{"id": "q", "question": "q?", "ground_truth_docs": ["g"]}])
    responses = _jsonl(tmp_path / "r.jsonl", [{"id": "q", "retrieved_ids": ["g"], "answer": "a"}])
    args = ["eval", str(golden), "--responses", str(responses), "--no-progress", "--quiet"]
    assert main([*args, "--judge", "none", "--evaluators", str(bad)]) == EXIT_USAGE
    assert f"{bad}:3: evaluator 'x': kind 'nope'" in capsys.readouterr().err
    llm = tmp_path / "llm.yaml"
    llm.write_text("evaluators:\n  - {name: tone, kind: llm, criterion: 'Polite?'}\n")
    assert main([*args, "--judge", "none", "--evaluators", str(llm)]) == EXIT_USAGE
    assert "tone (line 2) need the LLM judge" in capsys.readouterr().err
