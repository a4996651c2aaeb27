"""The Dockerfile's HEALTHCHECK command, run as written (with this Python) against a real agent: it
follows RAGMON_METRICS_PORT and speaks HTTPS when RAGMON_METRICS_TLS_CERT_FILE is set (the
agent's metrics port then serves TLS only), and fails when nothing healthy answers."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import trustme

from tests.agent.conftest import ScriptedJudge, running_agent
from tests.helpers.net import free_port

from .conftest import REPO


def healthcheck_argv() -> list[str]:
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    match = re.search(r"^HEALTHCHECK [^\n]*\\\n\s+CMD (\[.*\])$", text, re.M)
    assert match, "HEALTHCHECK ... CMD [exec form] in the Dockerfile"
    argv = json.loads(match.group(1))
    assert argv[0] == "python"
    return [sys.executable, *argv[1:]]


def run_healthcheck(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAGMON_")}
    return subprocess.run(healthcheck_argv(), env={**clean, **env}, capture_output=True, text=True, timeout=30)


@pytest.fixture(scope="module")
def server_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("pki")
    cert = trustme.CA().issue_cert("ragmon-agent.example.svc")  # names the service, not 127.0.0.1
    for i, blob in enumerate(cert.cert_chain_pems):
        blob.write_to_path(str(d / "server.pem"), append=i > 0)
    cert.private_key_pem.write_to_path(str(d / "server.key"))
    return d / "server.pem", d / "server.key"


async def test_healthcheck_over_plain_http() -> None:
    async with running_agent(ScriptedJudge()) as agent:
        ok = await asyncio.to_thread(run_healthcheck, RAGMON_METRICS_PORT=str(agent.metrics_port))
        assert ok.returncode == 0, ok.stderr
    down = await asyncio.to_thread(run_healthcheck, RAGMON_METRICS_PORT=str(free_port()))
    assert down.returncode != 0


async def test_healthcheck_follows_metrics_tls(server_cert: tuple[Path, Path]) -> None:
    cert, key = server_cert
    async with running_agent(ScriptedJudge(), metrics_tls_cert_file=str(cert), metrics_tls_key_file=str(key)) as agent:
        port = str(agent.metrics_port)
        tls = await asyncio.to_thread(run_healthcheck, RAGMON_METRICS_PORT=port, RAGMON_METRICS_TLS_CERT_FILE=str(cert))
        plain = await asyncio.to_thread(run_healthcheck, RAGMON_METRICS_PORT=port)
    assert tls.returncode == 0, tls.stderr
    assert plain.returncode != 0, "plain HTTP against the TLS port must not pass"
