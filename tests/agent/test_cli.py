"""The `ragmon agent` process: help, fail-fast configuration, graceful SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx

from ragmon.config import AGENT_SETTINGS
from tests.helpers.traffic import OtlpTraffic, healthy


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ragmon(*args: str, env: dict | None = None, **kw):
    return subprocess.run([sys.executable, "-m", "ragmon", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})}, **kw)


def test_agent_help_documents_every_flag_and_env_var():
    out = _ragmon("agent", "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    for setting in AGENT_SETTINGS:
        assert setting.flag in text, setting.flag
        assert setting.env in text, setting.env


def test_bad_setting_fails_at_startup_naming_it():
    out = _ragmon("agent", env={"RAGMON_RECEIVER_PORT": "not-a-port"})
    assert out.returncode == 2
    assert "RAGMON_RECEIVER_PORT" in out.stderr and "not-a-port" in out.stderr
    out = _ragmon("agent", "--sample-rate", "2")
    assert out.returncode == 2 and "--sample-rate" in out.stderr


def test_sigterm_stops_gracefully_with_exit_zero():
    rport, mport = _free_port(), _free_port()
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
