"""The Grafana dashboard and its provisioning, checked without a Grafana: generated file up to
date (and --check catching a stale one), built with Grafana's own typed SDK (the JSON is what the
SDK's dashboard model reads and writes back), layout valid, template variables, exemplars on score
panels, alert thresholds drawn."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import heatmap, prometheus, stat, timeseries

from tests.helpers.scripts import load_script

from .conftest import REPO

DASHBOARD = REPO / "grafana" / "dashboards" / "ragmon.json"
GENERATOR = REPO / "grafana" / "generate_dashboard.py"
# Keys the SDK's models do not declare, added by grafana/dashboard_gen/dashboard.py (and only these):
# the Prometheus datasource's annotation options, and a query variable's definition.
NOT_IN_SDK_MODEL = {
    "annotation": {"step", "titleFormat", "textFormat", "tagKeys", "useValueForTime"},
    "variable": {"definition"},
}


def load() -> dict:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def panels() -> list[dict]:
    return [p for p in load()["panels"] if p["type"] != "row"]


def _rules_generator() -> Any:
    return load_script(REPO / "deploy" / "prometheus" / "generate_rules.py", "rules_gen")


def _drop_z() -> float:
    return float(_rules_generator().DROP_Z)


def generate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(GENERATOR), *args], capture_output=True, text=True, timeout=120)


def test_dashboard_matches_its_generator() -> None:
    result = generate("--check")
    assert result.returncode == 0, result.stderr


def test_check_fails_on_a_stale_dashboard(tmp_path: Path) -> None:
    stale = tmp_path / "ragmon.json"
    current = DASHBOARD.read_text(encoding="utf-8")
    stale.write_text(current.replace('"Faithfulness mean"', '"Faithfulness (old title)"', 1), encoding="utf-8")
    result = generate("--check", "--output", str(stale))
    assert result.returncode == 1 and "out of date" in result.stderr, result
    missing = generate("--check", "--output", str(tmp_path / "absent.json"))
    assert missing.returncode == 1, missing
    rewritten = generate("--output", str(stale))
    assert rewritten.returncode == 0, rewritten.stderr
    assert stale.read_text(encoding="utf-8") == current


def _strip(doc: dict[str, Any]) -> dict[str, Any]:
    """The dashboard without the keys the SDK's models do not declare."""
    doc = json.loads(json.dumps(doc))
    for ann in doc["annotations"]["list"]:
        for key in NOT_IN_SDK_MODEL["annotation"]:
            ann.pop(key, None)
    for var in doc["templating"]["list"]:
        for key in NOT_IN_SDK_MODEL["variable"]:
            var.pop(key, None)
    return doc


def test_dashboard_is_built_with_grafanas_sdk() -> None:
    """The JSON round-trips through the SDK's typed dashboard model unchanged apart from the declared
    keys the SDK does not model (from_json drops any other unknown key, so equality proves there is
    none), every panel's options and queries are read as the SDK's types for that panel and
    datasource, and the schema version is the SDK's."""
    register_default_plugins()
    raw = load()
    model = dm.Dashboard.from_json(raw)
    assert json.loads(json.dumps(model, cls=JSONEncoder)) == _strip(raw)
    assert raw["schemaVersion"] == dm.Dashboard().schema_version >= 41
    types = {"timeseries": timeseries.Options, "stat": stat.Options, "heatmap": heatmap.Options}
    assert model.panels
    for panel in model.panels:
        if isinstance(panel, dm.RowPanel):
            continue
        assert isinstance(panel.options, types[panel.type_val]), (panel.title, type(panel.options))
        assert panel.targets and all(isinstance(t, prometheus.Dataquery) for t in panel.targets), panel.title


def test_layout_is_valid() -> None:
    ids = [p["id"] for p in load()["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    cells: set[tuple[int, int]] = set()
    for p in load()["panels"]:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"panel {p['title']!r} overlaps another"
                cells.add((x, y))


def test_template_variables() -> None:
    names = {v["name"]: v for v in load()["templating"]["list"]}
    assert {"datasource", "service", "pipeline"} <= set(names)
    assert names["service"]["includeAll"] and names["pipeline"]["multi"]
    for p in panels():
        assert p["datasource"]["uid"] == "${datasource}", p["title"]


def test_required_panels_exemplars_and_thresholds() -> None:
    assert _rules_generator().FLOORS == {}
    by_title = {p["title"]: p for p in panels()}
    for metric in ("Faithfulness", "Answer relevancy", "Context precision"):
        mean = by_title[f"{metric} mean"]
        assert any(t["exemplar"] for t in mean["targets"]), f"{metric}: exemplars on"
        # the shipped rules set no absolute floor, so no floor line is drawn that no alert stands behind
        assert mean["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"]["mode"] == "off"
        assert "No absolute floor is set" in mean["description"]
        assert by_title[f"{metric} distribution"]["type"] == "heatmap"
        share = by_title[f"Failing {metric.lower()}: share of answers (± 95 %)"]
        share_exprs = " ".join(t["expr"] for t in share["targets"])
        assert "ragmon:failing_share:ratio1h" in share_exprs and "ragmon:failing_share:ci95_1h" in share_exprs
    latency = by_title["Retrieval latency P95 / P50"]
    assert 0.5 in [s["value"] for s in latency["fieldConfig"]["defaults"]["thresholds"]["steps"]]
    exprs = " ".join(t["expr"] for p in panels() for t in p["targets"])
    for needed in (
        "ragmon_diagnosis_total",
        "ragmon_judge_tokens_total",
        "ragmon_judge_requests_total",
        "ragmon_traces_skipped_total",
        "ragmon_kafka_consumer_lag_messages",
        "ragmon_traces_sampled_total",
    ):
        assert needed in exprs
    verdict_stats = [p for p in panels() if p["type"] == "stat" and "Retrieval" in p["title"]]
    assert len(verdict_stats) == 4, "the 2x2 diagnosis grid"


def test_no_context_verdict_has_its_panels_in_the_diagnosis_row() -> None:
    """no_context traces are never judged, so no score panel sees them: the diagnosis row counts
    them (a stat over the time range) and shows their share of the diagnosed traces."""
    rows = [p for p in load()["panels"] if p["type"] == "row"]
    diagnosis = next(r for r in rows if r["title"].startswith("Diagnosis"))
    after = min(r["gridPos"]["y"] for r in rows if r["gridPos"]["y"] > diagnosis["gridPos"]["y"])
    in_row = {p["title"]: p for p in panels() if diagnosis["gridPos"]["y"] < p["gridPos"]["y"] < after}
    count = in_row["No context: retrieval returned nothing"]
    assert count["type"] == "stat"
    assert [t["expr"] for t in count["targets"]] == [
        'sum(increase(ragmon_diagnosis_total{service=~"$service", pipeline=~"$pipeline", '
        'verdict="no_context"}[$__range]))'
    ]
    share = in_row["No-context share of diagnosed traces"]
    (expr,) = [t["expr"] for t in share["targets"]]
    numerator, denominator = expr.split("\n/ ")
    assert 'verdict="no_context"' in numerator and "verdict" not in denominator
    assert share["fieldConfig"]["defaults"]["unit"] == "percentunit"


def test_provisioning_points_at_the_dashboard_folder() -> None:
    prov = yaml.safe_load((REPO / "grafana" / "provisioning" / "dashboards" / "ragmon.yml").read_text())
    ds = yaml.safe_load((REPO / "grafana" / "provisioning" / "datasources" / "ragmon.yml").read_text())
    assert prov["providers"][0]["folder"] == "ragmon"
    assert ds["datasources"][0]["type"] == "prometheus" and ds["datasources"][0]["uid"] == "prometheus"
    compose = (REPO / "deploy" / "docker-compose.yml").read_text()
    assert f"../grafana/dashboards:{prov['providers'][0]['options']['path']}" in compose


def test_quality_panels_read_the_rate_stream_and_priority_has_its_own() -> None:
    """Means, distributions and drops read sample!="priority" (directly or through the recording rules);
    the priority stream has its own panel; sampling panels and the release annotation exist."""
    by_title = {p["title"]: p for p in panels()}
    for p in panels():
        for t in p["targets"]:
            if "ragmon_score_ratio_" in t["expr"]:
                assert 'sample!="priority"' in t["expr"] or 'sample="priority"' in t["expr"], (p["title"], t["expr"])
    priority = by_title["Priority-sampled traces: mean score"]
    assert all('sample="priority"' in t["expr"] for t in priority["targets"])
    assert "ragmon_sample_rate_ratio" in by_title["Judging rate per pipeline"]["targets"][0]["expr"]
    detectable = " ".join(t["expr"] for t in by_title["Detectable drop per pipeline"]["targets"])
    assert "ragmon_detectable_drop_ratio" in detectable and "ragmon_detect_target_drop_ratio" in detectable
    z = by_title["Rise of the failing share: z (1h vs the same hour of 7 days)"]
    # the dashed line is the rules' z (generate_rules.DROP_Z, sized from the page budget: 3.64 today)
    assert [s["value"] for s in z["fieldConfig"]["defaults"]["thresholds"]["steps"]][1:] == [_drop_z()]
    annotations = {a["name"]: a for a in load()["annotations"]["list"]}
    assert "ragmon_release_info" in annotations["ragmon releases"]["expr"]
