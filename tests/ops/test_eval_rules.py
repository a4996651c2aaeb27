"""Offline evaluation in the ops files: the RagmonOfflineEval* rules (promtool unit tests, built
from the generator's constants, reading only what ``ragmon eval --pushgateway`` pushes), the
dashboard's offline-evaluation row, the Kubernetes CronJob and the CI workflow example (their
``ragmon eval`` command lines parsed by the real argument parser)."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ragmon.evaluation import pushgateway
from ragmon.evaluation.command import add_arguments

from .conftest import REPO, RULES
from .test_rules import load_generator

RULE_TEST = REPO / "deploy" / "prometheus" / "tests" / "offline_eval_test.yml"
DASHBOARD = REPO / "grafana" / "dashboards" / "ragmon.json"
CRONJOB = REPO / "deploy" / "kubernetes" / "eval-cronjob.yaml"
WORKFLOW = REPO / "docs" / "ci-eval-workflow.yml"
ALERTS = {"RagmonOfflineEvalGateFailed", "RagmonOfflineEvalRegression", "RagmonOfflineEvalStale"}
METRIC_NAME = re.compile(r"\bragmon_eval_[a-z0-9_]+")


def offline_group() -> dict[str, Any]:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    found = [g for g in groups if any(r.get("alert") in ALERTS for r in g["rules"])]
    assert len(found) == 1
    return dict(found[0])


def offline_panels() -> list[dict[str, Any]]:
    panels = json.loads(DASHBOARD.read_text(encoding="utf-8"))["panels"]
    start = next(i for i, p in enumerate(panels) if p["type"] == "row" and p["title"].startswith("Offline evaluation"))
    out = []
    for panel in panels[start + 1 :]:
        if panel["type"] == "row":
            break
        out.append(panel)
    return out


# --- rules ---------------------------------------------------------------------------------------------------
def test_offline_eval_rule_unit_tests(promtool: str, tmp_path: Path) -> None:
    """The shipped unit-test file against the offline group alone (a copy of the rules file holding only that
    group, at the path the test file names): the group needs nothing else, and promtool does not spend minutes
    evaluating the quality windows over the file's 49 simulated hours (test_rules runs the file against the
    whole rules file)."""
    (tmp_path / RULES.name).write_text(yaml.safe_dump({"groups": [offline_group()]}, sort_keys=False),
                                       encoding="utf-8")
    (tmp_path / "tests").mkdir()
    test_file = tmp_path / "tests" / RULE_TEST.name
    shutil.copyfile(RULE_TEST, test_file)
    assert f"../{RULES.name}" in yaml.safe_load(test_file.read_text(encoding="utf-8"))["rule_files"]
    result = subprocess.run(
        [promtool, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr


def test_offline_rules_read_only_pushed_gauges() -> None:
    """Every ragmon_eval_* name in the rules (expressions and annotation queries) is pushed by
    pushgateway.py, and none uses a range selector or rate: pushed gauges change once per run."""
    group = offline_group()
    assert {r["alert"] for r in group["rules"]} == ALERTS
    used: set[str] = set()
    for rule in group["rules"]:
        text = rule["expr"] + json.dumps(rule["annotations"])
        used |= set(METRIC_NAME.findall(text))
        assert not re.search(r"\[\d+[smhdw]\]", rule["expr"]) and "rate(" not in rule["expr"], rule["expr"]
        assert rule["labels"]["severity"] in ("warning", "critical")
    assert used and used <= set(pushgateway.METRIC_NAMES), used - set(pushgateway.METRIC_NAMES)


def test_generator_constants_reach_the_offline_rules() -> None:
    gen: Any = load_generator()
    original = gen.render()
    gen.EVAL_DROP, gen.EVAL_COMPARE_OFFSET, gen.EVAL_STALE_AFTER_S = 0.11, "7d", 50 * 3600
    changed = gen.render()
    assert ") > 0.11\n" in changed and ") > 0.11\n" not in original
    assert 'ragmon_eval_score_ratio{question_type="all"} offset 7d' in changed
    assert "ragmon_eval_last_run_timestamp_seconds > 180000" in changed


def test_offline_alerts_have_runbooks() -> None:
    doc = (REPO / "docs" / "alerts.md").read_text(encoding="utf-8")
    for alert in ALERTS:
        assert f"\n## {alert}\n" in doc


# --- dashboard -----------------------------------------------------------------------------------------------
def test_dashboard_offline_row() -> None:
    gen = load_generator()
    panels = offline_panels()
    by_title = {p["title"]: p for p in panels}
    exprs = " ".join(t["expr"] for p in panels for t in p["targets"])
    for needed in (
        "ragmon_eval_gate_passed",
        "ragmon_eval_questions",
        'ragmon_eval_score_ratio{question_type="all"',
        "ragmon_eval_retrieval_latency_p95_seconds",
        "ragmon:retrieval_latency_seconds:p95_",  # online, on the same panel
        "ragmon_eval_last_run_timestamp_seconds",
        "ragmon_eval_verdicts",
    ):
        assert needed in exprs, needed
    assert set(METRIC_NAME.findall(exprs)) <= set(pushgateway.METRIC_NAMES)
    latency = by_title["Retrieval P95: offline vs online"]
    assert {t["legendFormat"].split()[0] for t in latency["targets"]} == {"offline", "online"}
    drop = by_title[f"Offline score drop vs {gen.EVAL_COMPARE_OFFSET} earlier"]
    assert [s["value"] for s in drop["fieldConfig"]["defaults"]["thresholds"]["steps"]][1:] == [gen.EVAL_DROP]
    gate = by_title["Offline gate"]
    assert gate["fieldConfig"]["defaults"]["mappings"][0]["options"]["0"]["text"] == "FAILED"


# --- Kubernetes CronJob and CI workflow -----------------------------------------------------------------------
def eval_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragmon eval", exit_on_error=False)
    add_arguments(parser)
    return parser


def test_cronjob_runs_ragmon_eval_nightly_and_pushes() -> None:
    docs = [d for d in yaml.safe_load_all(CRONJOB.read_text(encoding="utf-8")) if d]
    cron = next(d for d in docs if d["kind"] == "CronJob")
    spec = cron["spec"]
    assert spec["concurrencyPolicy"] == "Forbid" and len(spec["schedule"].split()) == 5
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    container = pod["containers"][0]
    assert container["command"] == ["ragmon", "eval"]
    args = eval_parser().parse_args(container["args"])
    assert re.fullmatch(r"http://[a-z0-9.-]+:9091", args.pushgateway)
    assert args.app and args.evalset.startswith("/etc/ragmon-eval/")
    mounted = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    config = next(d for d in docs if d["kind"] == "ConfigMap")
    assert mounted["/etc/ragmon-eval"] == "evalset" and Path(args.evalset).name in config["data"]
    for line in config["data"][Path(args.evalset).name].splitlines():  # the example golden set is valid JSONL
        assert {"id", "question", "ground_truth_docs"} <= set(json.loads(line))
    # exit 1 (gate failed) is a verdict: the Job fails without a retry
    rules = spec["jobTemplate"]["spec"]["podFailurePolicy"]["rules"]
    assert any(r["action"] == "FailJob" and r["onExitCodes"]["values"] == [1] for r in rules)


def workflow_eval_commands(run: str) -> list[list[str]]:
    """The ``ragmon eval`` command lines of a workflow ``run:`` script (continuation lines joined)."""
    joined = re.sub(r"\\\n\s*", " ", run)
    return [shlex.split(line.strip())[2:] for line in joined.splitlines() if line.strip().startswith("ragmon eval")]


def test_ci_workflow_example() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    steps = workflow["jobs"]["evaluate"]["steps"]
    runs = [s["run"] for s in steps if "run" in s]
    commands = [c for run in runs for c in workflow_eval_commands(run)]
    assert len(commands) == 1
    argv = [a for a in commands[0] if a != "${baseline[@]}"]  # the optional --baseline/--significance
    args = eval_parser().parse_args(argv)
    assert args.junit and args.markdown and args.out and args.fail_if
    script = next(run for run in runs if "ragmon eval" in run)
    assert f'cat {args.markdown} >> "$GITHUB_STEP_SUMMARY"' in script
    assert "--baseline baseline/report.json" in script
    junit_step = next(s for s in steps if "junit" in s.get("uses", ""))
    assert junit_step["with"]["report_paths"] == str(args.junit)


def check_workflow(path: Path) -> subprocess.CompletedProcess[str]:
    """check-jsonschema with its vendored (offline) GitHub workflow schema."""
    tool = Path(sys.executable).parent / "check-jsonschema"
    binary = str(tool) if tool.exists() else shutil.which("check-jsonschema")
    if binary is None:
        pytest.fail("check-jsonschema is missing: pip install -e '.[dev]'")
    argv = [binary, "--builtin-schema", "vendor.github-workflows", str(path)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_ci_workflow_matches_the_github_workflow_schema() -> None:
    result = check_workflow(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_workflow_schema_check_rejects_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    stepz: []\n", encoding="utf-8")
    assert check_workflow(broken).returncode != 0
