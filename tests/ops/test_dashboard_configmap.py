"""The dashboard ConfigMap for Grafana's sidecar: generated from grafana/dashboards/ragmon.json,
kept current (--check), carrying the sidecar's label and the dashboard JSON unchanged, and a valid
Kubernetes object (kubernetes-validate, which also rejects a broken one in test_deploy.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.helpers.scripts import load_script

from .conftest import REPO
from .test_deploy import run, tool

SCRIPT = REPO / "scripts" / "gen_dashboard_configmap.py"
CONFIGMAP = REPO / "deploy" / "kubernetes" / "grafana-dashboard.yaml"


def test_configmap_is_current() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr or "stale: run python scripts/gen_dashboard_configmap.py"


def test_check_mode_catches_a_stale_configmap(tmp_path: Path) -> None:
    module = load_script(SCRIPT, "gen_dashboard_configmap")
    stale = tmp_path / "grafana-dashboard.yaml"
    stale.write_text(CONFIGMAP.read_text(encoding="utf-8").replace('"ragmon"', '"renamed"', 1), encoding="utf-8")
    module.OUTPUT = stale
    assert module.main(["--check"]) == 1
    assert module.main([]) == 0 and stale.read_text(encoding="utf-8") == CONFIGMAP.read_text(encoding="utf-8")


def test_configmap_carries_the_dashboard_for_the_sidecar() -> None:
    doc = yaml.safe_load(CONFIGMAP.read_text(encoding="utf-8"))
    assert doc["kind"] == "ConfigMap" and doc["apiVersion"] == "v1"
    assert doc["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(doc["data"]["ragmon.json"])
    assert dashboard == json.loads((REPO / "grafana" / "dashboards" / "ragmon.json").read_text(encoding="utf-8"))
    assert len(CONFIGMAP.read_bytes()) < 256 * 1024  # fits kubectl apply's last-applied annotation


def test_configmap_validates() -> None:
    result = run([tool("kubernetes-validate"), "--strict", "-k", "1.30.0", str(CONFIGMAP)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passed" in result.stdout


def test_operator_resources_carry_the_kube_prometheus_stack_label() -> None:
    for name in ("servicemonitor.yaml", "prometheusrule.yaml"):
        doc = yaml.safe_load((REPO / "deploy" / "kubernetes" / name).read_text(encoding="utf-8"))
        assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack", name


def test_run_as_non_root_is_on_the_ragmon_container_only() -> None:
    deployment = yaml.safe_load_all((REPO / "deploy" / "kubernetes" / "sidecar.yaml").read_text(encoding="utf-8"))
    pod = next(d for d in deployment if d and d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert "runAsNonRoot" not in pod.get("securityContext", {}), "the user's app container may run as root"
    containers = {c["name"]: c for c in pod["containers"]}
    assert containers["ragmon"]["securityContext"]["runAsNonRoot"] is True
    assert "runAsNonRoot" not in containers["app"].get("securityContext", {})
