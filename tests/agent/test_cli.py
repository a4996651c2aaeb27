"""The `ragmon agent` process: help, fail-fast configuration, graceful SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx

from ragmon import semconv as sc
from ragmon.config import agent_settings
from tests.helpers.net import free_port
from tests.helpers.traffic import OtlpTraffic, healthy


def _ragmon(*args: str, env: dict | None = None, **kw):
    return subprocess.run([sys.executable, "-m", "ragmon", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})}, **kw)


def test_agent_help_documents_every_flag_and_env_var():
    out = _ragmon("agent", "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    for setting in agent_settings():
        assert setting.flag in text, setting.flag
        assert setting.env in text, setting.env


def test_agent_help_is_grouped_by_section_with_meaningful_metavars():
    from ragmon.agent.command import AGENT_HELP_GROUPS, AGENT_HELP_OTHER, agent_help_group

    out = _ragmon("agent", "--help")
    assert out.returncode == 0
    headings = [line.rstrip(":") for line in out.stdout.splitlines() if line.endswith(":") and not line[0].isspace()]
    for title in ("receiver", "metrics", "assembler", "sampler", "judge", "diagnosis", "kafka", "security / TLS",
                  "process"):
        assert any(heading.startswith(title) for heading in headings), (title, headings)
    assert {agent_help_group(setting) for setting in agent_settings()} <= {t for t, _ in AGENT_HELP_GROUPS}
    assert AGENT_HELP_OTHER not in headings  # every setting has a section
    assert " VALUE" not in out.stdout
    assert "--receiver-port PORT" in out.stdout and "--judge-timeout-s SECONDS" in out.stdout
    # each flag is listed under its own section
    section = ""
    for line in out.stdout.splitlines():
        if line in {f"{heading}:" for heading in headings}:
            section = line.rstrip(":")
        elif line.startswith("  --sampler-rate"):
            assert section == "sampler"
        elif line.startswith("  --receiver-tls-cert-file"):
            assert section.startswith("security / TLS")


def test_bad_setting_fails_at_startup_naming_it():
    out = _ragmon("agent", env={"RAGMON_RECEIVER_PORT": "not-a-port"})
    assert out.returncode == 2
    assert "RAGMON_RECEIVER_PORT" in out.stderr and "not-a-port" in out.stderr
    out = _ragmon("agent", "--sample-rate", "2")  # the older flag spelling: the error names the current one
    assert out.returncode == 2 and "--sampler-rate / RAGMON_SAMPLER_RATE" in out.stderr


def test_busy_ports_fail_with_one_line_naming_the_setting():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        for which, other in (("metrics", "receiver"), ("receiver", "metrics")):
            out = _ragmon("agent", f"--{which}-port", port, f"--{other}-port", str(free_port()))
            assert out.returncode == 2, out.stderr
            lines = [line for line in out.stderr.splitlines() if line.strip()]
            assert "Traceback" not in out.stderr, out.stderr
            assert len(lines) == 1, out.stderr
            assert f"RAGMON_{which.upper()}_PORT" in lines[0] and port in lines[0], lines[0]


def _start_agent(rport: int, mport: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragmon", "agent", "--receiver-port", str(rport), "--metrics-port", str(mport)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0]
        try:
            if httpx.get(f"http://127.0.0.1:{mport}/readyz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("agent did not become ready")


_APP = """
import logging, sys
logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
import ragmon

@ragmon.pipeline(name="qa")
def rag(query):
    return "answer"

ragmon.init(service_name="app")
rag("question")
ragmon.flush(3000)
"""


def test_base_url_with_v1_traces_is_a_counted_and_explained_404():
    """The newcomer's mistake: OTEL_EXPORTER_OTLP_ENDPOINT=.../v1/traces (the exporter appends
    /v1/traces again). The app says so in one line; the agent counts the request and explains."""
    rport, mport = free_port(), free_port()
    proc = _start_agent(rport, mport)
    try:
        app = subprocess.run([sys.executable, "-c", _APP], capture_output=True, text=True, timeout=60,
                             env={"PATH": os.environ.get("PATH", ""),
                                  "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{rport}/v1/traces"})
        assert app.returncode == 0, app.stderr
        lines = [line for line in app.stderr.splitlines() if line.startswith("ragmon.sdk")]
        assert len(lines) == 1 and "HTTP 404" in lines[0], app.stderr
        assert "Failed to export" not in app.stderr
        metrics = httpx.get(f"http://127.0.0.1:{mport}/metrics", timeout=5).text
        rejected = [line for line in metrics.splitlines() if line.startswith(f"{sc.M_REQUESTS_RECEIVED}_total")
                    and f'outcome="{sc.OUTCOME_REJECTED}"' in line]
        assert rejected and float(rejected[0].split()[-1]) >= 1, metrics
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "answered 404" in output and "OTEL_EXPORTER_OTLP_ENDPOINT" in output, output


def test_sigterm_stops_gracefully_with_exit_zero():
    rport, mport = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragmon", "agent", "--receiver-port", str(rport), "--metrics-port", str(mport)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[0]
            try:
                if httpx.get(f"http://127.0.0.1:{mport}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise AssertionError("agent did not become ready")
        traffic = OtlpTraffic(f"http://127.0.0.1:{rport}/v1/traces")
        traffic.send(healthy())
        traffic.close()
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output
    assert "stopped" in output


async def test_agent_process_scores_with_the_llm_judge_given_on_the_command_line(monkeypatch):
    """`ragmon agent --judge llm --judge-base-url ... --judge-model ...`, as a user runs it: the
    process judges a trace over real HTTP (OpenAI protocol) and /metrics shows the llm judge's work."""
    import asyncio

    from tests.fakes.openai_server import FakeOpenAI
    from tests.helpers.scrape import scrape

    rport, mport = free_port(), free_port()
    async with FakeOpenAI() as server:
        env = {**os.environ, "RAGMON_JUDGE_API_KEY": "sk-cli-test"}
        proc = subprocess.Popen(  # noqa: ASYNC220  # starts the agent and returns; the fake LLM serves on this loop
            [sys.executable, "-m", "ragmon", "agent", "--receiver-port", str(rport), "--metrics-port", str(mport),
             "--judge", "llm", "--judge-base-url", server.base_url, "--judge-model", "cli-model"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        )
        try:
            async def wait_for(predicate, what: str) -> None:
                deadline = time.monotonic() + 90
                while time.monotonic() < deadline:
                    assert proc.poll() is None, proc.communicate()[0]
                    try:
                        if await asyncio.to_thread(predicate):
                            return
                    except httpx.HTTPError:
                        pass
                    await asyncio.sleep(0.2)
                raise AssertionError(f"timed out waiting for {what}")

            await wait_for(lambda: httpx.get(f"http://127.0.0.1:{mport}/readyz", timeout=1).status_code == 200,
                           "readiness")
            traffic = OtlpTraffic(f"http://127.0.0.1:{rport}/v1/traces")
            await asyncio.to_thread(traffic.send, healthy())
            await asyncio.to_thread(traffic.close)
            await wait_for(lambda: scrape(mport).value(f"{sc.M_TRACES_SCORED}_total", judge="llm") == 1,
                           "the trace to be scored by the llm judge")
            metrics = scrape(mport)
            chats = server.chat_requests
        finally:
            proc.send_signal(signal.SIGTERM)
            output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output
    assert len(chats) == 1 and chats[0].body["model"] == "cli-model"
    assert chats[0].headers["Authorization"] == "Bearer sk-cli-test"
    assert "sk-cli-test" not in output  # the key is never logged
    assert metrics.value(f"{sc.M_JUDGE_REQUESTS}_total", judge="llm", outcome="ok") >= 1
    assert metrics.value(f"{sc.M_JUDGE_TOKENS}_total", judge="llm", kind="prompt") > 0
    assert metrics.value(f"{sc.M_SCORE}_count", judge="llm", metric="faithfulness") == 1
