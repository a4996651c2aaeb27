"""``ragmon demo eval``: the bundled golden set, the two releases, and the gate through ``ragmon eval``'s
own path (app runner and span capture, the local judge, the default rules, the Markdown writer)."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragmon.cli import build_parser, main
from ragmon.demo import offline
from ragmon.demo.corpus import load_corpus
from ragmon.demo.text import sentences
from ragmon.evaluation.command import EXIT_GATE_FAILED, EXIT_PASSED, EXIT_USAGE
from ragmon.evaluation.goldenset import load_golden_set

RETRIEVAL_RULES = {"recall@5 drop > 0.1 (p < 0.05)", "context_precision drop > 0.1 (p < 0.05)"}


def _rules(report: dict[str, Any]) -> dict[str, str]:
    return {rule["rule"]: rule["status"] for rule in report["gate"]["rules"]}


# --- the bundled golden set ----------------------------------------------------------------


def test_the_golden_set_is_the_corpus_questions_with_gold_articles_and_quoted_answers() -> None:
    corpus = load_corpus()
    texts = {doc.id: doc.text for doc in corpus.documents}
    with offline.bundled_golden_set() as path:
        golden = load_golden_set(path)
    assert not golden.problems and not golden.warnings
    answerable = [row for row in golden.rows if row.question_type == "factoid"]
    unanswerable = [row for row in golden.rows if row.question_type == "no_answer"]
    assert len(golden.rows) == 46 and len(answerable) == 42 and len(unanswerable) == 4
    # every question of the corpus, once, with the article it names as a gold document of the top grade
    assert sorted(row.question for row in answerable) == sorted(q.question for q in corpus.questions)
    named = {q.question: q.document_id for q in corpus.questions}
    for row in answerable:
        assert row.ground_truth_docs[named[row.question]] == 2, row.id
        assert set(row.ground_truth_docs) <= set(texts), row.id
        assert all(grade in (1, 2) for grade in row.ground_truth_docs.values()), row.id
        # the reference answer is quoted, sentence by sentence, from the row's gold articles
        assert row.ground_truth_answer
        for sentence in sentences(row.ground_truth_answer):
            assert any(sentence in sentences(texts[doc]) for doc in row.ground_truth_docs), (row.id, sentence)
    for row in unanswerable:
        assert not row.ground_truth_docs and row.ground_truth_answer is None


# --- the command ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    """``ragmon demo eval`` as a user runs it: a real process, its exit code, stdout and reports."""
    out_dir = tmp_path_factory.mktemp("demo-eval")
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "ragmon", "demo", "eval", "--out-dir", str(out_dir)],
                          capture_output=True, text=True, env=env, timeout=240, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.returncode, done.stdout, out_dir


def test_demo_eval_passes_the_release_and_fails_the_broken_one(demo_run: tuple[int, str, Path]) -> None:
    code, stdout, out_dir = demo_run
    assert code == 0
    released = json.loads((out_dir / "released.json").read_text())
    broken = json.loads((out_dir / "broken.json").read_text())

    # the same report ragmon eval writes: the bundled set, the release's entry point, the local judge
    assert released["app"] == "ragmon.demo.releases:released" and broken["app"] == "ragmon.demo.releases:broken"
    assert released["judge"] == broken["judge"] == "local"
    assert released["questions"] == broken["questions"] == 46 and released["problems"]["count"] == 0
    assert broken["baseline"]["shared_questions"] == 46

    assert released["gate"]["passed"] is True
    assert _rules(released)["retrieval_p95_s > 0.5"] == "passed"
    assert released["metrics"]["recall@5"]["mean"] > 0.95 and released["metrics"]["composite"]["mean"] > 0.85

    assert broken["gate"]["passed"] is False
    found = _rules(broken)
    assert all(found[rule] == "failed" for rule in RETRIEVAL_RULES), found  # the worse retriever
    assert found["composite drop > 0.1 (p < 0.05)"] == "failed"
    assert found["faithfulness drop > 0.08"] == "failed"  # the prompt that contradicts
    assert broken["baseline"]["deltas"]["recall@5"]["delta"] < -0.1

    # what the user sees: the commands, both verdicts with their exit codes, the Markdown report
    assert "$ ragmon eval " in stdout and "--app ragmon.demo.releases:released" in stdout
    assert f"--baseline {out_dir / 'released.json'}" in stdout
    assert "gate PASSED (exit 0)" in stdout and "gate FAILED (exit 1)" in stdout
    markdown = (out_dir / "broken.md").read_text()
    assert markdown.startswith("## ❌ ragmon eval: gate failed") and markdown in stdout
    assert "recall@5 drop &gt; 0.1 (p &lt; 0.05)" in markdown
    assert (out_dir / "released.md").read_text().startswith("## ✅ ragmon eval: gate passed")
    assert stdout.rstrip().endswith(f"The gate passed the release and stopped the broken one. Reports: {out_dir}")


def test_the_issues_collapse_fails_ragmon_eval_and_passed_the_seeds_rules(
    demo_run: tuple[int, str, Path], tmp_path: Path
) -> None:
    """Every question answered from articles on another topic (recall@5 -> 0), against the release."""
    _, _, out_dir = demo_run
    with offline.bundled_golden_set() as golden:
        argv = ["eval", str(golden), "--app", "tests.demo.collapse_app:answer", "--baseline",
                str(out_dir / "released.json"), "--no-progress", "--quiet"]
        code = main([*argv, "--out", str(tmp_path / "collapse.json")])
        seeds_only = main([*argv, "--out", str(tmp_path / "seeds.json"), "--no-default-rules", "--warn-if",
                           "composite drop > 0.05", "--fail-if", "faithfulness drop > 0.08", "--fail-if",
                           "retrieval_p95_s > 0.5"])
    report = json.loads((tmp_path / "collapse.json").read_text())
    assert report["metrics"]["recall@5"]["mean"] == 0.0
    assert code == EXIT_GATE_FAILED
    found = _rules(report)
    assert all(found[rule] == "failed" for rule in RETRIEVAL_RULES | {"composite drop > 0.1 (p < 0.05)"}), found
    assert seeds_only == EXIT_PASSED  # what the issue saw: the seeds' rules let the collapse through
    assert _rules(json.loads((tmp_path / "seeds.json").read_text()))["composite drop > 0.05"] == "warned"


def test_demo_eval_says_so_when_the_gate_does_not_stop_the_second_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    released = offline.STEPS[0]
    monkeypatch.setattr(offline, "STEPS", (released, offline.Step("again", released.app, "the release again",
                                                                  EXIT_GATE_FAILED)))
    out = io.StringIO()
    assert offline.run(argparse.Namespace(out_dir=tmp_path), out=out) == 1
    assert "gate PASSED (exit 0)" in out.getvalue()
    assert "expected exit codes [0, 1] from the two runs, got [0, 0]" in capsys.readouterr().err


def test_an_unusable_out_dir_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert main(["demo", "eval", "--out-dir", str(blocker / "reports")]) == EXIT_USAGE
    assert "ragmon demo eval: --out-dir" in capsys.readouterr().err


def test_demo_keeps_its_flags_and_gains_the_eval_command() -> None:
    parser = build_parser()
    live = parser.parse_args(["demo", "--duration", "3", "--rate", "2"])
    assert live.demo_command is None and live.duration == 3.0
    offline_args = parser.parse_args(["demo", "eval", "--out-dir", "reports"])
    assert offline_args.demo_command == "eval" and offline_args.out_dir == Path("reports")
