"""The OTLP/gRPC receiver over TLS (the receiver's --receiver-tls-* settings, shared with OTLP/HTTP),
with real certificates made by trustme: the OpenTelemetry SDK's gRPC exporter trusting the CA
delivers and every span is counted; a plaintext client and a client that does not trust the CA get
nowhere, and the agent goes on serving without losing anything; rotel (a Collector-compatible
OpenTelemetry collector) relays OTLP/HTTP to the agent over OTLP/gRPC with TLS and a bearer token."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import trustme
from grpc import Compression
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult

from ragmon import semconv as sc
from ragmon.agent import Agent
from ragmon.ingest.receivers.grpc_receiver import EXPORT_METHOD, SERVICE_NAME
from tests.agent.conftest import ScriptedJudge, running_agent
from tests.helpers.eventually import eventually
from tests.helpers.net import free_port
from tests.helpers.traffic import OtlpTraffic, healthy
from tests.ingest.otel_helpers import SpanFactory

ROTEL = Path(__import__("rotel").__file__).parent / "rotel-agent"
TOKEN = "grpc-s3cret"
SPANS_PER_TRACE = 3  # tests.helpers.traffic: rag -> retrieve, generate


@dataclass
class Pki:
    ca: Path  # trust anchor of the agent's server certificate
    cert: Path
    key: Path
    other_ca: Path  # a CA that did not sign it


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("grpc-pki")
    ca, other = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    other.cert_pem.write_to_path(str(d / "other-ca.pem"))
    for i, blob in enumerate(server.cert_chain_pems):
        blob.write_to_path(str(d / "server.pem"), append=i > 0)
    server.private_key_pem.write_to_path(str(d / "server.key"))
    return Pki(d / "ca.pem", d / "server.pem", d / "server.key", d / "other-ca.pem")


def tls_settings(pki: Pki, **extra: object) -> dict[str, object]:
    return {
        "receiver_grpc_port": 0,
        "receiver_tls_cert_file": str(pki.cert),
        "receiver_tls_key_file": str(pki.key),
        **extra,
    }


class GrpcTraffic(OtlpTraffic):
    """tests.helpers.traffic's RAG requests, exported by the SDK's gRPC exporter over TLS."""

    def __init__(self, target: str, ca: Path, service: str = "tls-svc") -> None:
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        credentials = grpc.ssl_channel_credentials(root_certificates=ca.read_bytes())
        self.exporter = OTLPSpanExporter(
            endpoint=target, credentials=credentials, compression=Compression.Gzip, timeout=10
        )
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("tests.traffic")
        self.trace_ids = []


def send_over_tls(target: str, ca: Path, n: int, first: int = 0) -> None:
    traffic = GrpcTraffic(target, ca)
    try:
        for i in range(first, first + n):
            traffic.send(healthy(i))
    finally:
        traffic.close()


def export_once(exporter: OTLPSpanExporter, service: str) -> SpanExportResult:
    f = SpanFactory(service)
    with f.tracer.start_as_current_span("rag", attributes={"input.value": "q?"}):
        pass
    try:
        return exporter.export(f.finished())
    finally:
        exporter.shutdown()


def value(agent: Agent, name: str, **labels: str) -> float:
    return agent.metrics.registry.get_sample_value(name, labels) or 0.0


def scored(agent: Agent, service: str = "tls-svc") -> float:
    return value(agent, f"{sc.M_TRACES_SCORED}_total", service=service, pipeline="support", judge="scripted")


async def test_sdk_grpc_exporter_over_tls_and_refused_clients_lose_nothing(pki: Pki) -> None:
    async with running_agent(ScriptedJudge(), **tls_settings(pki)) as agent:
        target = f"127.0.0.1:{agent.receiver_grpc_port}"
        await asyncio.to_thread(send_over_tls, target, pki.ca, 3)
        assert await agent.wait_idle(20)
        assert scored(agent) == 3
        assert value(agent, f"{sc.M_SPANS_RECEIVED}_total", source="grpc") == 3 * SPANS_PER_TRACE
        ok = f"{sc.M_REQUESTS_RECEIVED}_total"
        assert value(agent, ok, source="grpc", outcome=sc.OUTCOME_OK) == 3 * SPANS_PER_TRACE

        # a plaintext client, and one that does not trust the agent's CA: no export gets through
        plaintext = OTLPSpanExporter(endpoint=target, insecure=True, timeout=3)
        untrusting = OTLPSpanExporter(
            endpoint=target,
            credentials=grpc.ssl_channel_credentials(root_certificates=pki.other_ca.read_bytes()),
            timeout=3,
        )
        assert await asyncio.to_thread(export_once, plaintext, "plaintext") == SpanExportResult.FAILURE
        assert await asyncio.to_thread(export_once, untrusting, "untrusting") == SpanExportResult.FAILURE
        async with grpc.aio.insecure_channel(target) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await channel.unary_unary(f"/{SERVICE_NAME}/{EXPORT_METHOD}")(b"", timeout=3)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE

        # the agent goes on serving TLS clients, and every span it accepted is accounted for
        await asyncio.to_thread(send_over_tls, target, pki.ca, 2, 3)
        assert await agent.wait_idle(20)
        assert scored(agent) == 5
        assert value(agent, f"{sc.M_SPANS_RECEIVED}_total", source="grpc") == 5 * SPANS_PER_TRACE
        assert value(agent, ok, source="grpc", outcome=sc.OUTCOME_OK) == 5 * SPANS_PER_TRACE
        assert value(agent, f"{sc.M_DROPPED}_total", reason=sc.DROP_MALFORMED_BODY) == 0


async def test_tls_and_token_together_over_grpc(pki: Pki) -> None:
    """TLS on, and the receiver's bearer token too: the token travels in the authorization metadata."""
    async with running_agent(ScriptedJudge(), **tls_settings(pki, receiver_bearer_token=TOKEN)) as agent:
        target = f"127.0.0.1:{agent.receiver_grpc_port}"
        credentials = grpc.ssl_channel_credentials(root_certificates=pki.ca.read_bytes())
        with_token = OTLPSpanExporter(
            endpoint=target, credentials=credentials, headers={"authorization": f"Bearer {TOKEN}"}, timeout=5
        )
        without = OTLPSpanExporter(endpoint=target, credentials=credentials, timeout=5)
        assert await asyncio.to_thread(export_once, with_token, "holder") == SpanExportResult.SUCCESS
        assert await asyncio.to_thread(export_once, without, "anonymous") == SpanExportResult.FAILURE
        assert value(agent, f"{sc.M_SPANS_RECEIVED}_total", source="grpc") == 1
        assert value(agent, f"{sc.M_REQUESTS_RECEIVED}_total", source="grpc", outcome=sc.OUTCOME_UNAUTHORIZED) == 1


# --- rotel: OTLP/HTTP in, OTLP/gRPC over TLS out, to the agent ---------------------------------------------
@contextlib.contextmanager
def rotel_relay(agent_grpc: str, log: Path) -> Iterator[str]:
    """rotel with its OTLP exporter in gRPC mode (its default), over TLS, with the bearer token."""
    http_port, grpc_port = free_port(), free_port()
    cmd = [
        str(ROTEL), "start",
        "--otlp-http-endpoint", f"127.0.0.1:{http_port}",
        "--otlp-grpc-endpoint", f"127.0.0.1:{grpc_port}",
        "--exporter", "otlp",
        "--otlp-exporter-protocol", "grpc",
        "--otlp-exporter-endpoint", f"https://{agent_grpc}",
        # rotel 0.0.1a15 (rotel-agent 0.0.1-alpha10) refuses to start with any of its TLS file or PEM
        # options ("Either both or neither of cert and key must be provided", even with both): it is
        # told to skip verifying the agent's certificate instead. The connection is still TLS: the
        # agent's port speaks nothing else (see the plaintext client above).
        "--otlp-exporter-tls-skip-verify",
        "--otlp-exporter-custom-headers", f"authorization=Bearer {TOKEN}",
        "--batch-timeout", "100ms",
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "RUST_LOG": "info"})
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", http_port)) == 0:
                    break
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "rotel did not open its OTLP/HTTP port"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{http_port}/v1/traces"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.mark.skipif(not ROTEL.exists(), reason="rotel binary not installed")
async def test_rotel_relays_to_the_agent_over_grpc_with_tls(pki: Pki, tmp_path: Path) -> None:
    async with running_agent(ScriptedJudge(), **tls_settings(pki, receiver_bearer_token=TOKEN)) as agent:
        log = tmp_path / "rotel.log"
        with rotel_relay(f"127.0.0.1:{agent.receiver_grpc_port}", log) as endpoint:
            traffic = OtlpTraffic(endpoint, service="via-rotel")
            try:
                for i in range(4):
                    await asyncio.to_thread(traffic.send, healthy(i))
            finally:
                await asyncio.to_thread(traffic.close)
            try:
                await eventually(lambda: scored(agent, "via-rotel") >= 4, what="4 traces relayed by rotel, scored")
            except AssertionError as exc:
                raise AssertionError(log.read_text()) from exc
        assert scored(agent, "via-rotel") == 4, log.read_text()
        assert value(agent, f"{sc.M_SPANS_RECEIVED}_total", source="grpc") == 4 * SPANS_PER_TRACE
        assert value(agent, f"{sc.M_SPANS_RECEIVED}_total", source="http") == 0
        assert value(agent, f"{sc.M_REQUESTS_RECEIVED}_total", source="grpc", outcome=sc.OUTCOME_UNAUTHORIZED) == 0
