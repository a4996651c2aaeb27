"""Shared pieces for the ops tests: repository paths and the Prometheus tool binaries."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "ragmon-rules.yml"
RULE_TESTS = sorted((REPO / "deploy" / "prometheus" / "tests").glob("*.yml"))
INSTALL_HINT = (
    "install it with scripts/install-prometheus.sh "
    "(Debian packages prometheus, prometheus-alertmanager, prometheus-pushgateway)"
)


def require_binary(name: str) -> str:
    """Path of ``name`` on PATH, or skip the test saying how to get it (CI installs it)."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed; {INSTALL_HINT}")
    return path


@pytest.fixture(scope="session")
def promtool() -> str:
    return require_binary("promtool")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "image: builds and runs the agent's container image (podman, runc, mmdebstrap: make services)")
