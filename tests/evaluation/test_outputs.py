"""The evaluation outputs on a hand-built report (tests/evaluation/data/sample_report.json):
Markdown read back by a CommonMark+GFM-tables parser, JUnit XML read back by ``junitparser``,
the Pushgateway registry read with ``get_sample_value`` and linted by ``promtool check metrics``,
the history directory, the progress bar and the terminal summary."""

from __future__ import annotations

import copy
import io
import json
import logging
import re
import shutil
import subprocess
import urllib.error
from pathlib import Path
from typing import Any

import pytest
from junitparser import Failure, JUnitXml, Skipped
from markdown_it import MarkdownIt
from markdown_it.token import Token
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from ragmon import semconv as sc
from ragmon.evaluation import history, pushgateway
from ragmon.evaluation.junit import render_junit
from ragmon.evaluation.markdown import DEFAULT_MAX_CHARS, GITHUB_COMMENT_LIMIT, escape_cell, render_markdown
from ragmon.evaluation.terminal import Progress, format_duration, render_summary

SAMPLE = Path(__file__).with_name("data") / "sample_report.json"


def sample() -> dict[str, Any]:
    return json.loads(SAMPLE.read_text(encoding="utf-8"))


def failed_report() -> dict[str, Any]:
    """The sample with the faithfulness drop rule failing and a dirty question text."""
    report = sample()
    report["gate"]["passed"] = False
    rule = report["gate"]["rules"][0]
    rule.update(status="failed", observed=0.7, delta=-0.2, p_value=0.004, message="faithfulness dropped 0.200 > 0.08")
    report["rows"][2]["question"] = "Refund policy?\x00\x1b[31m <script>alert(1)</script> | ]]> & more"
    report["rows"][2]["verdict_reason"] = "claims unsupported\x07 <b>bold</b>"
    return report


# --- Markdown -----------------------------------------------------------------------------------------
def parse(markdown: str) -> list[Token]:
    return MarkdownIt("commonmark").enable("table").parse(markdown)


def tables(markdown: str) -> list[list[list[str]]]:
    """Every table as rows of cell texts (inline content), header first, as a GFM parser sees them."""
    out: list[list[list[str]]] = []
    row: list[str] | None = None
    for token in parse(markdown):
        if token.type == "table_open":
            out.append([])
        elif token.type == "tr_open":
            row = []
        elif token.type == "inline" and row is not None:
            row.append(token.content)
        elif token.type == "tr_close" and row is not None:
            out[-1].append(row)
            row = None
    return out


def section_table(markdown: str, heading: str) -> list[list[str]]:
    """The first table after the heading ``### heading``."""
    after = markdown.split(f"### {heading}", 1)[1]
    return tables(after)[0]


def test_markdown_starts_with_the_gate_verdict_and_lists_failed_rules_first() -> None:
    passed = render_markdown(sample())
    assert passed.splitlines()[0] == "## ✅ ragmon eval: gate passed (0 failed, 1 warned, 4 rules)"
    failed = render_markdown(failed_report())
    lines = failed.splitlines()
    assert lines[0].startswith("## ❌ ragmon eval: gate failed (1 failed, 1 warned")
    bullets = [line for line in lines if line.startswith("- ")]
    assert bullets[0].startswith("- ❌ **faithfulness drop &gt; 0.08**")
    assert bullets[1].startswith("- ⚠️ **composite drop &gt; 0.05**")
    assert failed.index("faithfulness dropped 0.200") < failed.index("### Metrics")


def test_every_table_parses_with_consistent_columns() -> None:
    markdown = render_markdown(failed_report())
    found = tables(markdown)
    assert len(found) == 8  # gate, metrics, by type, by difficulty, verdicts, misses, worst, problems: no stray ones
    for table in found:
        widths = {len(row) for row in table}
        assert len(widths) == 1, table


def test_metrics_table_with_and_without_baseline() -> None:
    report = sample()
    table = section_table(render_markdown(report), "Metrics")
    assert table[0] == ["metric", "mean", "95% CI", "n", "baseline", "Δ", "Δ 95% CI", "p"]
    rows = {row[0]: row for row in table[1:]}
    assert set(rows) == {f"`{name}`" for name in report["metrics"]}
    assert rows["`faithfulness`"][1:] == ["0.833", "[0.650, 0.970]", "6", "0.900", "-0.067", "[-0.150, +0.000]",
                                          "0.090"]
    assert rows["`citation_correctness`"][1:3] == ["—", "—"]
    assert rows["`composite`"][7] == "0.030"
    report["baseline"] = None
    assert section_table(render_markdown(report), "Metrics")[0] == ["metric", "mean", "95% CI", "n"]


def test_question_types_primary_metric_verdicts_and_misses() -> None:
    markdown = render_markdown(sample())
    by_type = {row[0]: row for row in section_table(markdown, "By question type")[1:]}
    assert by_type["factoid"] == ["factoid", "2", "`mrr`", "0.667", "[0.333, 1.000]"]
    assert by_type["multi_hop"][2] == "`two_hop_recall@5`"
    assert by_type["no_answer"][2:] == ["—", "—", "—"]
    verdicts = {row[0]: row[1] for row in section_table(markdown, "Diagnosis verdicts")[1:]}
    assert verdicts == {"`ok`": "3", "`retrieval_failure`": "1", "`generation_failure`": "1", "`both`": "1"}
    misses = {row[0]: row[1] for row in section_table(markdown, "Multi-hop misses")[1:]}
    assert misses == {"`hop1_miss`": "0", "`hop2_miss`": "1", "`both_miss`": "0"}
    assert "retrieval P50 14 ms, P95 20 ms" in markdown


def test_user_text_cannot_break_tables_or_inject_html() -> None:
    markdown = render_markdown(failed_report())
    worst = section_table(markdown, "Worst")
    assert [row[0] for row in worst[1:]] == ["`q4`", "`q3`", "`q2`"]
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    assert "<script>" not in html and "<b>" not in html
    assert "&lt;b&gt;60 days&lt;/b&gt;" in html  # shown as text
    q2 = next(row for row in worst if row[0] == "`q2`")
    assert q2[1] == "Which plan includes SSO | SAML? And since when?"  # the pipe stays in its cell, newline gone
    problems = section_table(markdown, "⚠️ 2 row problems")
    assert problems[1] == ["evalset", "9", "—", "`malformed_row`", "line 9: 'question' is missing"]


def test_escape_cell() -> None:
    assert escape_cell("a|b\nc\r\n d") == "a\\|b c d"
    assert escape_cell("<i>&") == "&lt;i&gt;&amp;"
    assert escape_cell("x" * 500, limit=10) == "x" * 9 + "…"
    assert escape_cell(None) == ""


@pytest.mark.parametrize("max_chars", [DEFAULT_MAX_CHARS, 5_000, 200])
def test_markdown_is_capped_with_a_note(max_chars: int) -> None:
    report = sample()
    long_question = "Why " + "very " * 60 + "long?"
    report["worst"] = [
        {"id": f"q{i}", "question": long_question, "verdict": "both", "why": "x" * 300, "metrics": {}}
        for i in range(2_000)
    ]
    markdown = render_markdown(report, worst=2_000, max_chars=max_chars)
    assert len(markdown) <= max_chars <= GITHUB_COMMENT_LIMIT
    assert "Truncated to fit" in markdown.splitlines()[-1]
    assert markdown.startswith("## ✅ ragmon eval: gate passed")
    assert "Truncated" not in render_markdown(sample())


def test_markdown_worst_limit_and_minimal_report() -> None:
    markdown = render_markdown(sample(), worst=1)
    assert len(section_table(markdown, "Worst")) == 2 and "… and 2 more" in markdown
    minimal = render_markdown({"gate": {"passed": False, "rules": []}, "questions": 0})
    assert minimal.startswith("## ❌ ragmon eval: gate failed (0 failed, 0 warned, 0 rules)")
    with pytest.raises(ValueError):
        render_markdown(sample(), max_chars=10)


# --- JUnit --------------------------------------------------------------------------------------------------
def junit_suites(report: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "junit.xml"
    path.write_text(render_junit(report), encoding="utf-8")
    xml = JUnitXml.fromfile(str(path))
    return {suite.name: suite for suite in xml}


def test_junit_counts_match_the_report(tmp_path: Path) -> None:
    report = failed_report()
    suites = junit_suites(report, tmp_path)
    assert set(suites) == {"gate", "questions"}
    gate = suites["gate"]
    rules = report["gate"]["rules"]
    assert gate.tests == len(rules) == 4
    assert gate.failures == sum(r["status"] == "failed" for r in rules) == 1
    assert gate.skipped == sum(r["status"] == "skipped" for r in rules) == 1
    questions = suites["questions"]
    bad_rows = [r for r in report["rows"] if r["problem"] or (r["verdict"] not in (None, "ok"))]
    assert questions.tests == questions.failures == len(bad_rows) == 4
    assert {case.name for case in questions} == {"q2", "q3", "q4", "q7"}


def test_junit_case_results(tmp_path: Path) -> None:
    suites = junit_suites(failed_report(), tmp_path)
    gate = {case.name: case for case in suites["gate"]}
    failed = gate["faithfulness drop > 0.08"]
    assert isinstance(failed.result[0], Failure) and "0.200" in (failed.result[0].message or "")
    assert "p=0.004" in (failed.result[0].text or "")
    warned = gate["composite drop > 0.05"]
    assert warned.is_passed and "WARNING" in (warned.system_out or "")
    assert isinstance(gate["citation_correctness < 0.5"].result[0], Skipped)
    assert gate["retrieval_p95_s > 0.5"].is_passed
    rows = {case.name: case for case in suites["questions"]}
    timeout = rows["q7"].result[0]
    assert timeout.type == "app_timeout" and "did not answer within 30 s" in (timeout.message or "")
    q4 = rows["q4"].result[0]
    assert q4.type == "both" and "globex-founders" in (q4.message or "") and "hop2_miss" in (q4.text or "")
    assert rows["q4"].classname == "ragmon.eval.questions.multi_hop" and rows["q4"].time == pytest.approx(0.72)
    # control characters from the app were replaced, markup kept as text
    q3 = rows["q3"].result[0]
    assert "<script>alert(1)</script>" in (q3.text or "") and "\x00" not in (q3.text or "")


def test_junit_all_passing_has_an_empty_questions_suite(tmp_path: Path) -> None:
    report = sample()
    for row in report["rows"]:
        row.update(verdict="ok", problem=None)
    report["rows"].append({"id": "n1", "verdict": None, "problem": None})  # nothing judged: not a failure
    suites = junit_suites(report, tmp_path)
    assert suites["questions"].tests == 0 and suites["gate"].failures == 0


# --- Pushgateway registry (the push itself: tests/evaluation/test_pushgateway_e2e.py) ---------------------
def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_registry_holds_the_report_aggregates() -> None:
    report = sample()
    reg = pushgateway.build_registry(report)
    assert value(reg, sc.M_EVAL_SCORE, metric="recall@5", question_type="all") == 0.8
    assert value(reg, sc.M_EVAL_SCORE, metric="mrr", question_type="factoid") == 0.6667
    assert value(reg, sc.M_EVAL_SCORE_CI_LOWER, metric="faithfulness", question_type="all") == 0.65
    assert value(reg, sc.M_EVAL_SCORE_CI_UPPER, metric="faithfulness", question_type="all") == 0.97
    # no mean -> no series (not NaN); no interval -> no bounds
    assert value(reg, sc.M_EVAL_SCORE, metric="citation_correctness", question_type="all") is None
    assert value(reg, sc.M_EVAL_SCORE, metric="recall@5", question_type="summary") == 1.0
    assert value(reg, sc.M_EVAL_SCORE_CI_UPPER, metric="recall@5", question_type="summary") is None
    assert value(reg, sc.M_EVAL_QUESTIONS) == 6
    assert value(reg, sc.M_EVAL_PROBLEMS, reason="app_timeout") == 1
    assert value(reg, sc.M_EVAL_PROBLEMS, reason="app_error") == 0  # every known reason, 0 included
    assert value(reg, sc.M_EVAL_VERDICTS, verdict="retrieval_failure") == 1
    assert value(reg, sc.M_EVAL_GATE_PASSED) == 1
    assert value(reg, sc.M_EVAL_GATE_RULES, status="warned") == 1
    assert value(reg, sc.M_EVAL_GATE_RULES, status="failed") == 0
    assert value(reg, sc.M_EVAL_RETRIEVAL_P95) == 0.0203
    assert value(reg, sc.M_EVAL_PIPELINE_P95) == 0.695
    assert value(reg, sc.M_EVAL_LAST_RUN) == 1748743205.0  # 2025-06-01T02:00:05Z
    failed = pushgateway.build_registry(failed_report())
    assert value(failed, sc.M_EVAL_GATE_PASSED) == 0
    assert value(failed, sc.M_EVAL_GATE_RULES, status="failed") == 1


def test_registry_families_are_exactly_the_documented_names() -> None:
    families = {family.name for family in pushgateway.build_registry(sample()).collect()}
    assert families == set(pushgateway.METRIC_NAMES)
    for name in families:
        assert re.fullmatch(r"ragmon_eval_[a-z0-9_]+", name)


def test_registry_tolerates_a_sparse_report() -> None:
    reg = pushgateway.build_registry({"evalset_name": "x", "created_at": "not a time", "latency": {}})
    assert value(reg, sc.M_EVAL_GATE_PASSED) == 0
    assert value(reg, sc.M_EVAL_RETRIEVAL_P95) is None
    assert (value(reg, sc.M_EVAL_LAST_RUN) or 0) > 1.7e9  # now


def test_promtool_lints_the_pushed_exposition() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed; scripts/install-prometheus.sh installs it")
    text = generate_latest(pushgateway.build_registry(sample()))
    lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, timeout=60)
    assert lint.returncode == 0 and not lint.stdout.strip() and not lint.stderr.strip(), lint.stdout + lint.stderr


def test_grouping_key() -> None:
    assert pushgateway.grouping_key(sample()) == {"evalset": "shop-golden"}
    assert pushgateway.grouping_key(sample(), {"env": "prod"}) == {"evalset": "shop-golden", "env": "prod"}
    for clash in ("metric", "job", "reason"):
        with pytest.raises(ValueError, match=clash):
            pushgateway.grouping_key(sample(), {clash: "x"})


def test_push_to_a_closed_port_raises_a_clear_error() -> None:
    from tests.helpers.net import free_port

    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(pushgateway.PushgatewayError) as caught:
        pushgateway.push_report(sample(), url, timeout_s=5)
    assert str(caught.value).startswith(f"could not push to the Pushgateway at {url}: ")
    assert "refused" in str(caught.value).lower()
    assert isinstance(caught.value.__cause__, urllib.error.URLError)
    with pytest.raises(pushgateway.PushgatewayError, match="only http"):
        pushgateway.push_report(sample(), "ftp://gateway:9091")


# --- history ----------------------------------------------------------------------------------------------
def test_history_round_trip_in_time_order(tmp_path: Path) -> None:
    newer, older = sample(), sample()
    older["created_at"] = "2025-05-31T02:00:05+00:00"
    older["metrics"]["recall@5"]["mean"] = 0.7
    folder = tmp_path / "history"
    first = history.save_to_history(newer, folder)
    second = history.save_to_history(older, folder)
    again = history.save_to_history(newer, folder)  # same second: a new file, never an overwrite
    assert first.name == "20250601T020005.000000Z_shop-golden.json"
    assert again.name == "20250601T020005.000000Z_shop-golden-1.json"
    assert sorted(p.name for p in folder.iterdir()) == sorted([first.name, second.name, again.name])
    assert json.loads(first.read_text(encoding="utf-8")) == newer
    runs = history.load_history(folder)
    assert [r.path for r in runs] == [second, first, again]
    assert runs[0].metrics["recall@5"] == 0.7 and runs[1].metrics["recall@5"] == 0.8
    assert runs[1].gate_passed is True and runs[1].questions == 6 and runs[1].retrieval_p95_s == 0.0203
    assert runs[1].problems == 2 and runs[1].evalset_name == "shop-golden"


def test_history_skips_and_reports_unreadable_files(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    good = history.save_to_history(sample(), tmp_path)
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "list.json").write_text("[1, 2]", encoding="utf-8")
    (tmp_path / "other.json").write_text('{"schema": "something/1"}', encoding="utf-8")
    (tmp_path / "no-time.json").write_text(json.dumps({**sample(), "created_at": None}), encoding="utf-8")
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00")
    (tmp_path / ".tmp-partial.json").write_text("{", encoding="utf-8")  # an in-flight write: ignored
    (tmp_path / "notes.txt").write_text("ignored", encoding="utf-8")
    skipped: list[history.SkippedFile] = []
    with caplog.at_level(logging.WARNING, logger="ragmon.evaluation.history"):
        runs = history.load_history(tmp_path, skipped=skipped)
    assert [r.path for r in runs] == [good]
    assert sorted(s.path.name for s in skipped) == ["binary.json", "broken.json", "list.json", "no-time.json",
                                                    "other.json"]
    assert all(s.reason for s in skipped)
    assert sum("skipping unreadable history file" in r.message for r in caplog.records) == 5
    assert history.load_history(tmp_path / "missing") == []


def test_history_write_is_atomic_and_leaves_no_temp_files(tmp_path: Path) -> None:
    report = sample()
    report["evalset_name"] = "../../etc/pass wd"
    path = history.save_to_history(report, tmp_path)
    assert path.parent == tmp_path and path.name.endswith("_etc_pass_wd.json")
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    with pytest.raises(ValueError):
        history.save_to_history({**sample(), "questions": float("nan")}, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


# --- terminal ---------------------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_plain_lines_when_not_a_tty() -> None:
    out, clock = io.StringIO(), Clock()
    with Progress(20, stream=out, tty=False, clock=clock, log_every=0.25) as bar:
        for i in range(20):
            clock.now += 0.5
            bar.advance(failed=i == 3)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    assert lines == [
        "eval: 5/20 (25%) 1 with problems 2.0 q/s ETA 8s",
        "eval: 10/20 (50%) 1 with problems 2.0 q/s ETA 5s",
        "eval: 15/20 (75%) 1 with problems 2.0 q/s ETA 2s",
        "eval: 20/20 (100%) 1 with problems 2.0 q/s in 10s",
    ]
    bar.close()  # idempotent
    assert len(out.getvalue().splitlines()) == 4


def test_progress_redraws_in_place_on_a_tty() -> None:
    out, clock = io.StringIO(), Clock()
    bar = Progress(4, stream=out, tty=True, clock=clock, min_interval_s=1.0, label="judge")
    for _ in range(4):
        clock.now += 0.3  # faster than min_interval_s: throttled, except the last
        bar.advance()
    bar.close()
    text = out.getvalue()
    frames = [frame for frame in text.split("\r") if frame]
    assert frames[-1].startswith("[############################] judge: 4/4 (100%)") and text.endswith("\n")
    assert len(frames) < 5  # throttled
    assert "ETA" not in frames[-1] and "in 1s" in frames[-1]


def test_progress_survives_a_closed_stream() -> None:
    out = io.StringIO()
    bar = Progress(2, stream=out, tty=True)
    out.close()
    bar.advance()
    bar.close()


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0, 42.4, 185, 3725)] == ["0s", "42s", "3m05s", "1h02m"]


def test_render_summary() -> None:
    text = render_summary(sample())
    assert text.splitlines()[0] == "ragmon eval — shop-golden: 6 questions, judge local"
    assert "Gate: PASSED (0 failed, 1 warned, 4 rules)" in text
    assert "  WARN composite drop > 0.05:" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("faithfulness"))
    assert row.split() == ["faithfulness", "0.833", "[0.650,", "0.970]", "-0.067", "0.090"]
    assert "By type: factoid 2 (mrr 0.667)" in text
    assert "Verdicts: ok 3, retrieval_failure 1, generation_failure 1, both 1" in text
    assert "Problems: 2 rows (app_timeout 1, malformed_row 1)" in text
    assert "\x1b[" not in text
    failed = render_summary(failed_report(), color=True, worst=1)
    assert "\x1b[31mFAILED\x1b[0m" in failed and "FAIL\x1b[0m faithfulness drop > 0.08" in failed
    assert failed.count("\n  q") == 1


def test_outputs_do_not_mutate_the_report() -> None:
    report = failed_report()
    before = copy.deepcopy(report)
    render_markdown(report)
    render_junit(report)
    render_summary(report)
    pushgateway.build_registry(report)
    assert report == before
