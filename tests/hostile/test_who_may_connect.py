"""Who may connect: TLS (server certificate, client certificates) and bearer tokens on the OTLP
receiver and on /worst, exercised with the OpenTelemetry SDK's own OTLP/HTTP exporter and real
certificates made by trustme; refusals are counted. A port reachable beyond loopback without TLS
or a token is refused unless explicitly waived."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import trustme
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from ragmon import semconv as sc
from ragmon.config import load_agent_config
from ragmon.errors import ConfigError
from tests.agent.conftest import ScriptedJudge, running_agent
from tests.helpers.net import free_port
from tests.hostile._support import ROOT, rag_trace
from tests.ingest.otel_helpers import SpanFactory

TOKEN = "s3cret-token"


@dataclass
class Pki:
    ca: Path  # trust anchor of the agent's server certificate
    server_cert: Path
    server_key: Path
    client_ca: Path  # the CA the agent trusts for client certificates
    client_cert: Path
    client_key: Path
    rogue_cert: Path  # a client certificate from a CA the agent does not trust
    rogue_key: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pki]:
    d = tmp_path_factory.mktemp("pki")
    server_ca, client_ca, rogue_ca = trustme.CA(), trustme.CA(), trustme.CA()
    server = server_ca.issue_cert("127.0.0.1", "localhost")
    client = client_ca.issue_cert("exporter@rag-app.example")
    rogue = rogue_ca.issue_cert("exporter@rag-app.example")
    server_ca.cert_pem.write_to_path(str(d / "ca.pem"))
    client_ca.cert_pem.write_to_path(str(d / "client-ca.pem"))
    for i, blob in enumerate(server.cert_chain_pems):
        blob.write_to_path(str(d / "server.pem"), append=i > 0)
    server.private_key_pem.write_to_path(str(d / "server.key"))
    client.cert_chain_pems[0].write_to_path(str(d / "client.pem"))
    client.private_key_pem.write_to_path(str(d / "client.key"))
    rogue.cert_chain_pems[0].write_to_path(str(d / "rogue.pem"))
    rogue.private_key_pem.write_to_path(str(d / "rogue.key"))
    yield Pki(d / "ca.pem", d / "server.pem", d / "server.key", d / "client-ca.pem", d / "client.pem",
              d / "client.key", d / "rogue.pem", d / "rogue.key")


@pytest.fixture(autouse=True)
def _no_ca_bundle_override(monkeypatch: pytest.MonkeyPatch) -> None:
    """requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override a session's own CA file (the
    exporter's certificate_file): keep a machine's bundle from replacing the test's CA."""
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)


def _export(url: str, pki: Pki, *, token: str | None, client: tuple[Path, Path] | None,
            service: str) -> SpanExportResult:
    """One RAG trace through the OpenTelemetry SDK's OTLP/HTTP exporter, configured for TLS and headers."""
    f = SpanFactory(service)
    rag_trace(f)
    exporter = OTLPSpanExporter(
        endpoint=url, certificate_file=str(pki.ca), timeout=3,
        client_certificate_file=str(client[0]) if client else None,
        client_key_file=str(client[1]) if client else None,
        headers={"Authorization": f"Bearer {token}"} if token else None)
    try:
        return exporter.export(f.finished())
    finally:
        exporter.shutdown()


def _value(agent: object, name: str, **labels: str) -> float:
    registry = agent.metrics.registry  # type: ignore[attr-defined]
    return registry.get_sample_value(name, labels) or 0.0


async def test_tls_with_client_certificates_and_a_token_end_to_end(pki: Pki) -> None:
    async with running_agent(
            ScriptedJudge(), receiver_tls_cert_file=str(pki.server_cert), receiver_tls_key_file=str(pki.server_key),
            receiver_tls_client_ca_file=str(pki.client_ca), receiver_bearer_token=TOKEN) as agent:
        url = f"https://localhost:{agent.receiver_port}/v1/traces"
        good = await asyncio.to_thread(_export, url, pki, token=TOKEN, client=(pki.client_cert, pki.client_key),
                                       service="trusted")
        wrong_token = await asyncio.to_thread(_export, url, pki, token="guess",
                                              client=(pki.client_cert, pki.client_key), service="guesser")
        rogue = await asyncio.to_thread(_export, url, pki, token=TOKEN, client=(pki.rogue_cert, pki.rogue_key),
                                        service="rogue")
        no_cert = await asyncio.to_thread(_export, url, pki, token=TOKEN, client=None, service="anonymous")
        assert await agent.wait_idle(20)
        assert good == SpanExportResult.SUCCESS
        assert wrong_token == rogue == no_cert == SpanExportResult.FAILURE
        assert _value(agent, f"{sc.M_TRACES_SCORED}_total", service="trusted", pipeline="faq", judge="scripted") == 1
        assert _value(agent, f"{sc.M_TRACES_RECEIVED}_total", service="guesser", pipeline="faq") == 0
        failures = f"{sc.M_AUTH_FAILURES}_total"
        assert _value(agent, failures, endpoint=sc.ENDPOINT_RECEIVER, reason=sc.AUTH_FAILED_TOKEN) == 1
        assert _value(agent, failures, endpoint=sc.ENDPOINT_RECEIVER, reason=sc.AUTH_FAILED_TLS) >= 2
        assert _value(agent, f"{sc.M_REQUESTS_RECEIVED}_total", source="http",
                      outcome=sc.OUTCOME_UNAUTHORIZED) == 1
        # plain HTTP to the TLS port gets nowhere
        with pytest.raises(httpx.HTTPError):
            await asyncio.to_thread(httpx.post, f"http://127.0.0.1:{agent.receiver_port}/v1/traces",
                                    content=b"", timeout=3)


async def test_worst_needs_the_token_and_metrics_stay_open(pki: Pki) -> None:
    async with running_agent(ScriptedJudge(), metrics_bearer_token=TOKEN, metrics_tls_cert_file=str(pki.server_cert),
                             metrics_tls_key_file=str(pki.server_key)) as agent:
        f = SpanFactory("worst-svc")
        rag_trace(f, question="What is the secret?")
        await asyncio.to_thread(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{agent.receiver_port}/v1/traces").export,
                                f.finished())
        assert await agent.wait_idle(20)
        base = f"https://localhost:{agent.metrics_port}"
        async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=str(pki.ca)), timeout=10) as client:
            anonymous = await client.get(f"{base}/worst")
            wrong = await client.get(f"{base}/worst", headers={"Authorization": "Bearer nope"})
            allowed = await client.get(f"{base}/worst", headers={"Authorization": f"Bearer {TOKEN}"})
            metrics = await client.get(f"{base}/metrics")
            health = await client.get(f"{base}/healthz")
    assert anonymous.status_code == wrong.status_code == 401
    assert "secret" not in anonymous.text + wrong.text
    assert allowed.status_code == 200 and allowed.json()["worst"][0]["question"] == "What is the secret?"
    assert metrics.status_code == 200 and health.status_code == 200
    assert _value(agent, f"{sc.M_AUTH_FAILURES}_total", endpoint=sc.ENDPOINT_METRICS, reason=sc.AUTH_FAILED_TOKEN) == 2


async def test_worst_serves_no_text_beyond_loopback_without_a_token() -> None:
    """The text on /worst (question, answer) is trace content: on a non-loopback metrics port it
    needs a token (or the explicit waiver); /metrics, /healthz and /readyz stay open."""
    async with running_agent(ScriptedJudge(), metrics_host="0.0.0.0") as agent:
        base = f"http://127.0.0.1:{agent.metrics_port}"
        async with httpx.AsyncClient(timeout=10) as client:
            worst = await client.get(f"{base}/worst")
            metrics = await client.get(f"{base}/metrics")
    assert worst.status_code == 403
    assert metrics.status_code == 200
    waiver = {"metrics_host": "0.0.0.0", "insecure_allow_unauthenticated_bind": True}
    async with running_agent(ScriptedJudge(), **waiver) as agent, httpx.AsyncClient(timeout=10) as client:
        waived = await client.get(f"http://127.0.0.1:{agent.metrics_port}/worst")
    assert waived.status_code == 200


def test_unprotected_receiver_beyond_loopback_is_refused_unless_waived(tmp_path: Path) -> None:
    for host in ("0.0.0.0", "::", "10.0.0.7", "rag-app.internal"):
        with pytest.raises(ConfigError, match="insecure-allow-unauthenticated-bind"):
            load_agent_config({"receiver_host": host}, environ={})
    for ok in ({"receiver_host": "127.0.0.1"}, {"receiver_host": "::1"}, {"receiver_host": "localhost"},
               {"receiver_host": "0.0.0.0", "receiver_bearer_token": TOKEN},
               {"receiver_host": "0.0.0.0", "insecure_allow_unauthenticated_bind": "true"},
               {"receiver_host": "0.0.0.0", "source": "kafka"}):  # the receiver does not run
        load_agent_config(ok, environ={})
    with pytest.raises(ConfigError, match="set both or neither"):
        load_agent_config({"receiver_tls_cert_file": str(tmp_path / "a.pem")}, environ={})
    # the command line fails fast with a clear message (exit code 2)
    done = subprocess.run([sys.executable, "-m", "ragmon", "agent", "--receiver-host=0.0.0.0",
                           f"--receiver-port={free_port()}", f"--metrics-port={free_port()}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 2
    assert "RAGMON_INSECURE_ALLOW_UNAUTHENTICATED_BIND" in done.stderr
