"""``ragmon eval``'s report shows contradicted claims with their evidence: in the JSON's worst
questions, the Markdown summary and the terminal, judged by the offline local judge."""

from __future__ import annotations

import json
from pathlib import Path

from ragmon.cli import main
from ragmon.evaluation.markdown import render_markdown
from ragmon.evaluation.terminal import render_summary

CONTEXTS = ["The Team plan costs $19 per month and includes 5 seats.",
            "The Business plan costs $49 per month and includes 20 seats."]


def test_the_report_shows_a_contradicted_claim_with_its_source(tmp_path: Path) -> None:
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "team", "question": "What does the Team plan cost?", "ground_truth_docs": ["t"]},
        {"id": "business", "question": "What does the Business plan cost?", "ground_truth_docs": ["b"]}]))
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "team", "retrieved_ids": ["t", "b"], "contexts": CONTEXTS,
         "answer": "The Team plan costs $49 per month."},
        {"id": "business", "retrieved_ids": ["b", "t"], "contexts": CONTEXTS[::-1],
         "answer": "The Business plan costs $49 per month."}]))
    out = tmp_path / "report.json"
    main(["eval", str(golden), "--responses", str(responses), "--judge", "local", "--no-progress", "--quiet",
          "--out", str(out)])
    report = json.loads(out.read_text())
    worst = {w["id"]: w for w in report["worst"]}
    [claim] = worst["team"]["contradicted_claims"]
    assert claim["reason"] == "number 49 ≠ 19" and claim["evidence"] == CONTEXTS[0]
    assert worst["business"]["contradicted_claims"] == []
    assert "contradicts its sources: “The Team plan costs $49 per month.” (number 49 ≠ 19" in render_markdown(report)
    assert "contradicted: The Team plan costs $49 per month." in render_summary(report)
