"""The Prometheus rules: generated file up to date, valid for promtool, unit-tested, documented."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.helpers.scripts import load_script

from .conftest import REPO, RULE_TESTS, RULES

ALERTS_DOC = REPO / "docs" / "alerts.md"
GENERATOR = REPO / "deploy" / "prometheus" / "generate_rules.py"
# Alerts whose value says nothing: `up == 0` is always 0 (the description names the instance).
VALUE_FREE = {"RagmonAgentDown"}


def load_generator() -> ModuleType:
    return load_script(REPO / "deploy" / "prometheus" / "generate_rules.py", "ragmon_generate_rules")


def alert_rules() -> list[dict]:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_rules_file_matches_its_generator() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "deploy/prometheus/generate_rules.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_promtool_check_rules(promtool: str) -> None:
    result = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def run_rule_test(promtool: str, path: Path) -> subprocess.CompletedProcess[str]:
    # a guard against a hang, not a speed check: the longest file took ~5 min of promtool beside other work on
    # 2 cores once the long windows rolled (hour-apart lookups)
    return subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=1700,
                          cwd=REPO)


@pytest.mark.timeout(1800)
def test_promtool_unit_tests(promtool: str) -> None:
    assert RULE_TESTS, "no rule unit tests found"
    # one promtool per file, as many at once as there are cores: a promtool test runs on about one core, and the
    # files took ~16 min one after another; the largest files first, so the last to start is a short one
    by_size = sorted(RULE_TESTS, key=lambda path: path.stat().st_size, reverse=True)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        outputs = pool.map(lambda path: run_rule_test(promtool, path), by_size)
        results = dict(zip(by_size, outputs, strict=True))
    failed = {path.name: r.stdout + r.stderr for path, r in results.items()
              if r.returncode != 0 or r.stdout.count("SUCCESS") != 1}
    assert not failed, "\n".join(f"{name}:\n{output}" for name, output in failed.items())


def test_every_alert_is_unit_tested_firing_and_quiet() -> None:
    """Each alert name appears in the unit tests at least once with expected alerts (it fires)
    and at least once with none (quiet before, and resolved after)."""
    fires: dict[str, int] = defaultdict(int)
    quiet: dict[str, int] = defaultdict(int)
    for path in RULE_TESTS:
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["tests"]:
            for case in group.get("alert_rule_test", []):
                (fires if case.get("exp_alerts") else quiet)[case["alertname"]] += 1
    names = {rule["alert"] for rule in alert_rules()}
    assert names - set(fires) == set(), "alerts never tested firing"
    assert names - set(quiet) == set(), "alerts never tested quiet/resolved"
    severities = {(r["alert"], r["labels"]["severity"]) for r in alert_rules()}
    tested = set()
    for path in RULE_TESTS:
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["tests"]:
            for case in group.get("alert_rule_test", []):
                for exp in case.get("exp_alerts") or []:
                    tested.add((case["alertname"], exp["exp_labels"]["severity"]))
    assert severities - tested == set(), "alert severities never tested firing"


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda r: f"{r['alert']}-{r['labels']['severity']}")
def test_alert_has_annotations_severity_and_runbook(rule: dict) -> None:
    annotations = rule["annotations"]
    assert rule["labels"]["severity"] in ("warning", "critical")
    assert annotations["summary"].strip()
    if rule["alert"] not in VALUE_FREE:
        assert "$value" in annotations["description"], "the description must carry the number"
    anchor = annotations["runbook_url"].rsplit("#", 1)[1]
    assert anchor == rule["alert"].lower()
    headings = {github_anchor(h) for h in re.findall(r"^#+\s+(.+)$", ALERTS_DOC.read_text(encoding="utf-8"), re.M)}
    assert anchor in headings, f"docs/alerts.md has no section for {rule['alert']}"


def github_anchor(heading: str) -> str:
    """GitHub's heading slug: lower case, punctuation dropped, spaces to dashes."""
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return slug.replace(" ", "-")


def test_generator_constants_reach_the_rules() -> None:
    """Changing a threshold constant changes the generated rules (they are not hard-coded)."""
    gen = load_generator()
    original = gen.render()
    gen.DROP_CRITICAL = 0.12
    gen.RETRIEVAL_P95_WARNING_S = 0.75
    changed = gen.render()
    assert ">= 0.06\n" in changed and ">= 0.06\n" not in original  # MIN_EFFECT x the critical step
    assert "retrieval_latency_seconds:p95_5m > 0.75" in changed


def test_score_means_read_the_rate_stream_and_drops_need_significance() -> None:
    """Every rule over the raw score series excludes priority samples; every drop alert tests the failing
    share's rise for significance (z above DROP_Z, the agent's --alpha) with a minimum effect; the seed
    steps are kept."""
    gen = load_generator()
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    raw_series = r"ragmon_score_(?:ratio_sum|ratio_count|squared_ratio_total|failures_total)(\{[^}]*\})?"
    raw = [r for r in rules if re.search(raw_series, r["expr"])]
    assert raw, "no rule reads the score series"
    for rule in raw:
        for selector in re.findall(raw_series, rule["expr"]):
            assert selector == '{sample!="priority"}', (rule.get("record") or rule.get("alert"), selector)
    drops = [r for r in rules if r.get("alert", "").endswith("Drop") and "Offline" not in r["alert"]]
    assert drops
    for rule in drops:
        window = rule["labels"]["window"]
        assert f"ragmon:score_failures:rise_z{window}{{metric=" in rule["expr"] and f"> {gen.DROP_Z:g}" in rule["expr"]
        assert "z = " in rule["annotations"]["description"]
    # every drop alert over every window, a warning and a critical each
    windows = {(r["alert"], r["labels"]["window"], r["labels"]["severity"]) for r in drops}
    assert len(windows) == len(drops) == (1 + len(gen.LONG_WINDOWS)) * 2 * len(gen.quality_metrics())
    assert (gen.DROP_WARNING, gen.DROP_CRITICAL) == (0.05, 0.08)
    from ragmon import quality
    from ragmon.config import AgentConfig

    # the rules and power-based sampling test at one level: the agent's default --alpha is the rules'
    assert gen.DROP_ALPHA == quality.alert_alpha() == AgentConfig().detect_alpha


def test_floors_are_off_by_default_and_fire_where_set(promtool: str, tmp_path: Path) -> None:
    """No absolute floor in the shipped rules (a pipeline whose quality never changed cannot cross one);
    --floor writes them into your own file, and the floor unit tests run against that file."""
    assert not [r for r in alert_rules() if r["alert"].endswith("BelowFloor")]
    floors = REPO / "deploy" / "prometheus" / "tests" / "floors" / "floors_test.yml"
    shutil.copy(floors, tmp_path / floors.name)
    subprocess.run([sys.executable, str(GENERATOR), "--output", str(tmp_path / "ragmon-rules-floors.yml"),
                    "--floor", "faithfulness=0.5", "--floor", "answer_relevancy=0.5",
                    "--floor", "context_precision=0.4"], check=True, capture_output=True, timeout=60)
    generated = yaml.safe_load((tmp_path / "ragmon-rules-floors.yml").read_text(encoding="utf-8"))
    named = {r["alert"] for g in generated["groups"] for r in g["rules"] if "alert" in r}
    floored = {"RagmonFaithfulnessBelowFloor", "RagmonAnswerRelevancyBelowFloor", "RagmonContextPrecisionBelowFloor"}
    assert floored <= named
    result = subprocess.run([promtool, "test", "rules", floors.name], capture_output=True, text=True, timeout=600,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    bad = subprocess.run([sys.executable, str(GENERATOR), "--output", str(tmp_path / "x.yml"),
                          "--floor", "faithful=0.5"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--floor" in bad.stderr


def test_a_fleet_budget_sizes_z_for_the_rules_and_the_agent(tmp_path: Path) -> None:
    """--pipelines / --fleet-budget size the drop tests' z from the fleet's false-page budget, and the
    agent's --alpha follows --alert-pipelines / --alert-budget to the same level."""
    from ragmon import quality
    from ragmon.config import load_agent_config

    def z_of(*args: str) -> set[str]:
        out = tmp_path / "fleet.yml"
        subprocess.run([sys.executable, str(GENERATOR), "--output", str(out), *args], check=True,
                       capture_output=True, timeout=60)
        rules = [r for g in yaml.safe_load(out.read_text(encoding="utf-8"))["groups"] for r in g["rules"]]
        return {m for r in rules if r.get("alert", "").endswith(("Drop", "Rise"))
                for m in re.findall(r"rise_z\w+(?:\{[^}]*\})? > ([\d.]+)", r["expr"])}

    assert z_of() == {"4.08"}  # one pipeline, 0.5 false pages a month
    assert z_of("--pipelines", "100") == {"5.05"}  # a hundred pipelines share the same half page
    assert z_of("--pipelines", "100", "--fleet-budget", "1") == {"4.91"}
    config = load_agent_config({"alert_pipelines": 100}, environ={})
    # 3,186 chances a month per test: each window length's disjoint windows times its episodes on noise
    assert config.detect_alpha == pytest.approx(quality.alert_alpha(100)) == pytest.approx(0.5 / (100 * 7 * 3186))
    assert load_agent_config({"alert_pipelines": 100, "detect_alpha": 0.01}, environ={}).detect_alpha == 0.01
