"""End to end: ``ragmon demo`` as a user runs it — a real subprocess with the in-process agent,
the real SDK exporting OTLP over HTTP, the offline local judge — checked on its /metrics while
it runs and on its final summary (text and JSON)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ragmon import semconv as sc
from tests.helpers.net import free_port
from tests.helpers.scrape import Scrape

SERVICE = {"service": "ragmon-demo"}
EXIT_TIMEOUT_S = 150  # 8 s of traffic, then flushing and judging what is left, on a busy 2-core box


def _start_demo(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], int, Path]:
    metrics_port = free_port()
    summary = tmp_path / "summary.json"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}
    env.pop("RAGMON_SAMPLER_RATE", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragmon", "demo", "--metrics-port", str(metrics_port),
         "--receiver-port", str(free_port()), "--summary-json", str(summary), *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    return proc, metrics_port, summary


def _scrape_until(proc: subprocess.Popen[str], port: int, ready) -> Scrape:  # type: ignore[no-untyped-def]
    """Scrape /metrics while the demo runs until ``ready(scrape)``; fail if the demo exits first."""
    last: Scrape | None = None
    while proc.poll() is None:
        try:
            response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
            last = Scrape(response.text)
            if ready(last):
                return last
        except httpx.TransportError:
            pass  # the agent is still loading its model
        time.sleep(0.3)
    out = proc.stdout.read() if proc.stdout else ""
    pytest.fail(f"demo exited (rc={proc.returncode}) before /metrics showed scores; last scrape: "
                f"{last.text[-500:] if last else None}\n{out[-3000:]}")


def _finish(proc: subprocess.Popen[str]) -> str:
    try:
        out, _ = proc.communicate(timeout=EXIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"demo did not exit in time:\n{out[-3000:]}")
    assert proc.returncode == 0, out[-3000:]
    return out


def test_demo_runs_scores_and_separates_injected_failures(tmp_path: Path) -> None:
    proc, port, summary_path = _start_demo(
        tmp_path, "--duration", "8", "--rate", "6", "--seed", "3", "--sample-rate", "1.0",
        "--contradiction-share", "0.3", "--retrieval-miss-share", "0.15", "--off-topic-share", "0.1",
        "--slow-retrieval-share", "0.1",
    )
    try:
        # A scrape is not atomic across metric families (one may be read before a trace is scored and
        # the next after), so wait until both the scores and the scored counter show it.
        live = _scrape_until(proc, port, lambda s: s.value(f"{sc.M_SCORE}_count", **SERVICE) > 0
                             and s.value(f"{sc.M_TRACES_SCORED}_total", **SERVICE) > 0)
        # While it runs: traces arrive over OTLP, are scored, and are labelled with the demo's service.
        assert live.value(f"{sc.M_TRACES_RECEIVED}_total", **SERVICE) > 0
        assert live.value(f"{sc.M_TRACES_SCORED}_total", **SERVICE, judge="local") > 0
        metrics = {lab["metric"] for lab in live.labelsets(f"{sc.M_SCORE}_count")}
        assert metrics == {"faithfulness", "answer_relevancy", "context_precision"}
        assert {lab["pipeline"] for lab in live.labelsets(f"{sc.M_TRACES_RECEIVED}_total")} == {"support_bot"}
        out = _finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

    # The final summary a newcomer reads.
    for section in ("What you are looking at", "final summary", "Traffic", "Agent", "Scores by injected failure",
                    "Caught?", "false alarms", "Look next", f"http://127.0.0.1:{port}/metrics"):
        assert section in out, section
    # the whole 8 s of traffic ran (a loaded machine may report a second more: the last request goes out late)
    ran = re.search(r"^Ran (\d+) s \((finished|stopped early \(Ctrl-C\))\)", out, re.MULTILINE)
    assert ran is not None and ran.group(2) == "finished" and int(ran.group(1)) >= 8, out[-3000:]
    summary = json.loads(summary_path.read_text())
    agent, kinds = summary["agent"], summary["kinds"]
    sent = sum(k["sent"] for k in kinds.values())
    assert sent >= 30  # ~6/s for 8 s
    assert summary["app_errors"] == 0
    # Every request's trace reached the agent and is accounted for; at sample rate 1 all are scored.
    assert agent["received"] == sent
    assert agent["scored"] + sum(agent["skipped"].values()) + sum(agent["failed"].values()) == agent["received"]
    assert agent["scored"] == agent["received"]
    assert sum(k["scored"] for k in kinds.values()) == agent["scored"]
    assert sum(agent["verdicts"].values()) == agent["scored"]
    assert agent["retrieval_p95_s"] > 0
    for kind in ("healthy", "contradiction", "retrieval_miss", "off_topic"):
        assert kinds[kind]["scored"] > 0, kind
    healthy = kinds["healthy"]["means"]
    # The judge separates each broken kind from healthy traffic on the score that should drop.
    assert kinds["contradiction"]["means"]["faithfulness"] < healthy["faithfulness"]
    assert kinds["retrieval_miss"]["means"]["context_precision"] < healthy["context_precision"]
    assert kinds["off_topic"]["means"]["answer_relevancy"] < healthy["answer_relevancy"] - 0.3
    # Retrieval misses are flagged (their answers drift off the question); whether the verdict names
    # retrieval depends on the judge's context precision, reported in the summary's "Caught?" section.
    assert kinds["retrieval_miss"]["flagged"] >= 0.8 * kinds["retrieval_miss"]["scored"]
    assert kinds["off_topic"]["caught"] >= 0.8 * kinds["off_topic"]["scored"]
    assert kinds["healthy"]["flagged"] <= 0.2 * kinds["healthy"]["scored"]
    # Slow retrievals are seen by latency, which the agent measures on every trace.
    assert agent["retrieval_p95_s"] >= 0.5 or kinds["slow_retrieval"]["sent"] < 0.05 * sent
    if kinds["slow_retrieval"]["scored"]:
        assert kinds["slow_retrieval"]["caught"] == kinds["slow_retrieval"]["scored"]


def test_ctrl_c_stops_early_and_still_prints_the_final_summary(tmp_path: Path) -> None:
    # --live forces the redrawn screen although stdout is a pipe here.
    proc, port, summary_path = _start_demo(tmp_path, "--duration", "300", "--rate", "4", "--live")
    try:
        _scrape_until(proc, port, lambda s: s.value(f"{sc.M_TRACES_RECEIVED}_total", **SERVICE) >= 8)
        proc.send_signal(signal.SIGINT)
        out = _finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "stopped early (Ctrl-C)" in out
    live_frames = out.count("\x1b[H")  # cursor home: one per redraw, one for the final screen
    assert live_frames >= 2
    assert "Ctrl-C stops early and still prints the final summary" in out  # a live frame
    assert "Caught?" in out
    summary = json.loads(summary_path.read_text())
    assert summary["stopped_early"] is True
    assert summary["elapsed_s"] < 300
    assert summary["agent"]["received"] >= 4


def test_bad_flags_fail_with_a_clear_message() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ragmon", "demo", "--contradiction-share", "0.9", "--off-topic-share", "0.5"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "failure shares add up to 1.58, more than 1" in result.stderr
    result = subprocess.run(
        [sys.executable, "-m", "ragmon", "demo", "--agent", "external"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "--agent external needs --otlp-endpoint" in result.stderr


def test_busy_metrics_port_is_named_in_the_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "ragmon", "demo", "--duration", "2", "--metrics-port", str(port)],
            capture_output=True, text=True, timeout=120,
        )
    assert result.returncode == 2
    assert f"already using port {port}" in result.stderr
    assert "--metrics-port 0" in result.stderr


async def test_external_agent_mode_sends_to_a_running_agent(tmp_path: Path) -> None:
    """``--agent external``: no agent in the demo process; its traces land in an agent that is
    already running (here one in the test process, the way docker compose runs it beside)."""
    import asyncio

    from prometheus_client import CollectorRegistry

    from ragmon.agent import Agent
    from ragmon.config import load_agent_config

    config = load_agent_config({"receiver_port": 0, "metrics_port": 0, "sample_rate": 1.0}, environ={})
    async with Agent(config, registry=CollectorRegistry()) as agent:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ragmon", "demo", "--agent", "external", "--duration", "3", "--rate", "5",
            "--otlp-endpoint", f"http://127.0.0.1:{agent.receiver_port}/v1/traces",
            "--metrics-url", f"http://127.0.0.1:{agent.metrics_port}",
            "--summary-json", str(tmp_path / "summary.json"),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        raw, _ = await asyncio.wait_for(proc.communicate(), EXIT_TIMEOUT_S)
        out = raw.decode()
        assert proc.returncode == 0, out[-3000:]
        assert await agent.wait_idle(30)
        received = agent.metrics.registry.get_sample_value(
            f"{sc.M_TRACES_RECEIVED}_total", {"service": "ragmon-demo", "pipeline": "support_bot"})
        summary = json.loads((tmp_path / "summary.json").read_text())
    sent = sum(k["sent"] for k in summary["kinds"].values())
    assert sent >= 10
    assert received == sent
    assert "no in-process score listener" in out
    assert f"the ragmon agent at http://127.0.0.1:{agent.receiver_port}/v1/traces" in out
    # The counters it read back from the external agent's /metrics.
    assert summary["mode"] == "external"
    assert summary["agent"]["received"] > 0


def test_linger_keeps_the_printed_urls_alive_until_ctrl_c(tmp_path: Path) -> None:
    import queue
    import threading

    proc, port, _ = _start_demo(tmp_path, "--duration", "2", "--rate", "3", "--linger", "120")
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        while not any("served for 120 s more" in line for line in seen):
            assert time.monotonic() < deadline, "".join(seen)[-3000:]
            try:
                seen.append(lines.get(timeout=1))
            except queue.Empty:
                assert proc.poll() is None, "".join(seen)[-3000:]
        time.sleep(0.5)
        assert proc.poll() is None  # the summary is out and the URLs it printed still answer
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code == 200
        assert httpx.get(f"http://127.0.0.1:{port}/worst", timeout=5).status_code == 200
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        assert time.monotonic() - started < 30  # Ctrl-C ends the linger, not the 120 s
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(10)
        if proc.stdout is not None:
            proc.stdout.close()
