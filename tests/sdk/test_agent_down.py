"""The agent is down (or the URL is wrong): a real application process, pointed at a closed port
or at a real HTTP server answering 404, logs one clear ragmon line, none of OpenTelemetry's retry
noise, and exits within the documented flush bound (``EXIT_FLUSH_MILLIS``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ragmon.sdk import setup
from tests.helpers.net import free_port

APP = textwrap.dedent("""
    import logging, sys
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
    import ragmon

    @ragmon.retriever
    def search(query):
        return [{"id": "doc-1", "text": "Paris is in France.", "score": 0.9}]

    @ragmon.generator
    def generate(query, docs):
        return "Paris."

    @ragmon.pipeline(name="qa")
    def rag(query):
        return generate(query, search(query))

    ragmon.init(service_name="app")
    for i in range(int(sys.argv[1])):
        rag(f"question {i}")
    if len(sys.argv) > 2:
        ragmon.flush(3000)  # a batch goes out (and fails) before exit
    print("app done", flush=True)
""")


def run_app(endpoint: str, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {"PATH": "/usr/bin:/bin", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint, "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", APP, *args], capture_output=True, text=True, env=env, timeout=60)
    return time.monotonic() - started, done


def ragmon_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "ragmon.sdk" in line]


def test_the_documented_exit_bound_is_small() -> None:
    assert setup.EXIT_FLUSH_MILLIS <= 2_000
    assert setup.DEFAULT_EXPORT_TIMEOUT_S <= setup.EXIT_FLUSH_MILLIS / 1000


@pytest.mark.parametrize("flush_first", [False, True], ids=["spans-pending-at-exit", "failed-flush-then-exit"])
def test_agent_down_one_clear_line_and_bounded_exit(flush_first: bool) -> None:
    # a baseline: the same interpreter starting and importing everything, agent irrelevant
    base_s, base = run_app("http://127.0.0.1:1/v1/traces", "0")
    assert base.returncode == 0, base.stderr
    elapsed, done = run_app(f"http://127.0.0.1:{free_port()}/v1/traces", "50", *(["flush"] if flush_first else []))
    assert done.returncode == 0, done.stderr
    assert "app done" in done.stdout
    # exit delayed by at most the documented flush time (asserted under 2x it, over the baseline)
    assert elapsed - base_s < 2 * setup.EXIT_FLUSH_MILLIS / 1000, (elapsed, base_s, done.stderr)
    if flush_first:
        lines = ragmon_lines(done.stderr)
        assert len(lines) == 1, done.stderr
        assert "cannot send spans to the ragmon agent" in lines[0] and "connection refused" in lines[0]
        assert "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" in lines[0]
    assert "Transient error" not in done.stderr and "Failed to export" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) <= 2, done.stderr  # the one line, maybe the shutdown-timeout note


class NotFound(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def not_found_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_wrong_path_404_is_explained_once(not_found_server: int) -> None:
    _, done = run_app(f"http://127.0.0.1:{not_found_server}/v1/traces/v1/traces", "5", "flush")
    assert done.returncode == 0, done.stderr
    lines = ragmon_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert "HTTP 404" in lines[0] and "/v1/traces" in lines[0] and "OTEL_EXPORTER_OTLP_ENDPOINT" in lines[0]
    assert "Failed to export" not in done.stderr, done.stderr
