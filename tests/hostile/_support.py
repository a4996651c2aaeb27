"""Shared pieces for the hostile tests: real OTLP bodies, accounting read from a real scrape,
and a real `ragmon agent` process whose memory can be measured."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from ragmon import semconv as sc
from tests.helpers.eventually import eventually_sync
from tests.helpers.net import free_port
from tests.helpers.scrape import Scrape
from tests.ingest.otel_helpers import SpanFactory

ROOT = Path(__file__).resolve().parents[2]
PROTO = {"content-type": "application/x-protobuf"}
JSON = {"content-type": "application/json"}


def totals(s: Scrape) -> tuple[float, float]:
    """(received, scored + skipped + failed) over every label set."""
    received = s.value(f"{sc.M_TRACES_RECEIVED}_total")
    accounted = (s.value(f"{sc.M_TRACES_SCORED}_total") + s.value(f"{sc.M_TRACES_SKIPPED}_total")
                 + s.value(f"{sc.M_TRACES_FAILED}_total"))
    return received, accounted


def rag_trace(f: SpanFactory, *, pipeline: str = "faq", question: str = "How do I reset my password?",
              answer: str = "Use the reset link on the account page.",
              document: str = "Passwords are reset from the account page.") -> None:
    """One complete RAG trace (root + retriever) recorded by the real OpenTelemetry SDK."""
    root = {sc.RAGMON_STAGE: "pipeline", sc.RAGMON_PIPELINE: pipeline, sc.INPUT_VALUE: question,
            sc.OUTPUT_VALUE: answer, sc.RAGMON_CONTENT_SAMPLED: True}
    search = {sc.RAGMON_STAGE: "retriever", sc.SPAN_KIND: "RETRIEVER", "retrieval.documents.0.document.id": "kb-1",
              "retrieval.documents.0.document.content": document, "retrieval.documents.0.document.score": 0.9}
    with f.tracer.start_as_current_span("rag", attributes=root), \
            f.tracer.start_as_current_span("search", attributes=search):
        pass


@dataclass
class AgentProcess:
    proc: subprocess.Popen[bytes]
    receiver_port: int
    metrics_port: int
    log: IO[bytes]

    def log_text(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.receiver_port}/v1/traces"

    def scrape(self) -> Scrape:
        response = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=30)
        response.raise_for_status()
        return Scrape(response.text)

    def peak_rss_bytes(self) -> int:
        """The process's high-water mark of resident memory (VmHWM), what a cgroup limit sees."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM in /proc/<pid>/status")

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=120)  # a safety net, not a measurement: a hang fails here


@contextlib.contextmanager
def agent_process(*flags: str, env: dict[str, str] | None = None) -> Iterator[AgentProcess]:
    """``ragmon agent`` as a real process on free loopback ports, ready when /readyz says so."""
    receiver_port, metrics_port = free_port(), free_port()
    args: Sequence[str] = [sys.executable, "-m", "ragmon", "agent", f"--receiver-port={receiver_port}",
                           f"--metrics-port={metrics_port}", *flags]
    clean_env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMON_")}
    # the log goes to a file, not a pipe: a chatty agent must never block on its stderr
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(args, cwd=ROOT, env={**clean_env, **(env or {})},
                                stdout=subprocess.DEVNULL, stderr=log)
        agent = AgentProcess(proc, receiver_port, metrics_port, log)
        try:
            def ready() -> bool:
                assert proc.poll() is None, f"agent exited: {agent.log_text()}"
                return httpx.get(f"http://127.0.0.1:{metrics_port}/readyz", timeout=5).status_code == 200

            eventually_sync(ready, timeout_s=120, what="the agent ready", interval_s=0.2)
            yield agent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
