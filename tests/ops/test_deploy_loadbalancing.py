"""The load-balancing road's deploy files, as files: the Collector config
(deploy/otel-collector/loadbalancing.yaml; run by the real Collector in test_loadbalancing.py, and
`otelcol validate`d with the other shipped configs in tests/kafka/test_collector_configs.py), the
Kubernetes manifest (kubernetes-validate; the ConfigMap holds that same config; the static resolver
names exactly the StatefulSet's pods) and the compose file (Compose v2 `config`; the resolver's names
are the agents' network aliases). The agents' settings are read by the agent's own command line."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from .conftest import REPO
from .test_deploy import compose_config, docs, run, tool

DEPLOY = REPO / "deploy"
CONFIG = DEPLOY / "otel-collector" / "loadbalancing.yaml"
MANIFEST = DEPLOY / "kubernetes" / "loadbalancing.yaml"
COMPOSE = DEPLOY / "docker-compose.loadbalancing.yml"
TOKEN_ENV = "RAGMON_RECEIVER_BEARER_TOKEN"


def collector_config() -> dict:
    return yaml.safe_load(CONFIG.read_text(encoding="utf-8"))


def hostnames(config: dict) -> list[str]:
    return list(config["exporters"]["load_balancing"]["resolver"]["static"]["hostnames"])


def test_collector_routes_by_trace_id_to_the_agents_over_grpc_with_the_receiver_token() -> None:
    config = collector_config()
    lb = config["exporters"]["load_balancing"]
    assert lb["routing_key"] == "traceID"
    assert set(lb["resolver"]) == {"static"} and len(hostnames(config)) >= 2
    assert all(h.endswith(":4317") for h in hostnames(config)), "the agents' OTLP/gRPC port"
    otlp = lb["protocol"]["otlp"]
    assert otlp["headers"]["authorization"] == f"Bearer ${{env:{TOKEN_ENV}}}"
    # an agent that is down or pushes back gets the spans again, long enough for a restart
    assert otlp["retry_on_failure"]["enabled"] and otlp["sending_queue"]["enabled"]
    assert re.fullmatch(r"\d+s", otlp["retry_on_failure"]["max_elapsed_time"])
    assert int(otlp["retry_on_failure"]["max_elapsed_time"][:-1]) >= 120
    assert config["service"]["pipelines"]["traces"]["exporters"] == ["load_balancing"]


def test_kubernetes_manifest_validates() -> None:
    result = run([tool("kubernetes-validate"), "--strict", "-k", "1.30.0", str(MANIFEST)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("passed") == len(docs(MANIFEST)), result.stdout


def by_kind(kind: str) -> list[dict]:
    return [d for d in docs(MANIFEST) if d["kind"] == kind]


def test_kubernetes_config_map_is_the_tested_config_and_names_every_agent_pod() -> None:
    (config_map,) = by_kind("ConfigMap")
    shipped = yaml.safe_load(config_map["data"]["config.yaml"])
    assert shipped == collector_config(), "the ConfigMap carries deploy/otel-collector/loadbalancing.yaml"
    (sts,) = by_kind("StatefulSet")
    headless = next(s for s in by_kind("Service") if s["metadata"]["name"] == sts["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["selector"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    name, service = sts["metadata"]["name"], headless["metadata"]["name"]
    assert hostnames(shipped) == [f"{name}-{i}.{service}:4317" for i in range(sts["spec"]["replicas"])]
    (collector,) = [d for d in by_kind("Deployment") if d["metadata"]["name"] == "otel-collector-lb"]
    container = collector["spec"]["template"]["spec"]["containers"][0]
    token = next(e for e in container["env"] if e["name"] == TOKEN_ENV)["valueFrom"]["secretKeyRef"]
    agent = sts["spec"]["template"]["spec"]["containers"][0]
    agent_token = next(e for e in agent["env"] if e["name"] == TOKEN_ENV)["valueFrom"]["secretKeyRef"]
    assert token == agent_token and "optional" not in token, "one required Secret key for both sides"
    assert container["volumeMounts"][0]["mountPath"] + "/config.yaml" in container["args"][0]


def test_kubernetes_agents_load_as_agent_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragmon.agent.command import config_from_args
    from ragmon.cli import build_parser

    (sts,) = by_kind("StatefulSet")
    pod = sts["spec"]["template"]["spec"]
    agent = pod["containers"][0]
    with monkeypatch.context() as m:
        for key in [k for k in os.environ if k.startswith("RAGMON_")]:
            m.delenv(key)
        for entry in agent["env"]:
            m.setenv(entry["name"], entry.get("value", "token-from-the-secret"))
        config = config_from_args(build_parser().parse_args(["agent", *agent["args"]]))
    assert config.source == "http" and config.receiver_grpc_port == 4317 and config.receiver_host == "0.0.0.0"
    assert config.receiver_bearer_token, "beyond loopback: the token"
    assert pod["terminationGracePeriodSeconds"] > 2 * config.shutdown_grace_s
    ports = {p["name"]: p["containerPort"] for p in agent["ports"]}
    assert ports == {"otlp-grpc": 4317, "metrics": 9464}
    assert agent["securityContext"]["allowPrivilegeEscalation"] is False and pod["securityContext"]["runAsNonRoot"]
    metrics = next(s for s in by_kind("Service") if s["spec"]["ports"][0]["port"] == 9464)
    assert metrics["metadata"]["labels"]["ragmon.io/metrics"] == "true"


def test_compose_file_is_valid_and_its_agents_are_the_resolvers_names() -> None:
    result = compose_config(COMPOSE)
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    collector = services["otel-collector"]
    (mount,) = collector["volumes"]
    assert Path(mount["source"]) == CONFIG and mount["target"] == collector["command"][0].split("=", 1)[1]
    aliases = {}
    for name, service in services.items():
        for alias in (service.get("networks", {}).get("default") or {}).get("aliases", []):
            aliases[alias] = name
    wanted = [h.rsplit(":", 1) for h in hostnames(collector_config())]
    assert sorted(aliases) == sorted(host for host, _ in wanted)
    for host, port in wanted:
        agent = services[aliases[host]]
        assert f"--receiver-grpc-port={port}" in agent["command"]
        assert agent["environment"]["RAGMON_RECEIVER_HOST"] == "0.0.0.0"
        assert agent["environment"][TOKEN_ENV] == collector["environment"][TOKEN_ENV]
