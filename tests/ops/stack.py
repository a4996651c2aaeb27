"""Real Prometheus, Alertmanager and Pushgateway processes (Debian packages) on loopback ports, for the
end-to-end ops tests, plus the rule-file rewriting that makes test-sized windows.

Every wait is bounded; a process that does not come up fails the test with its log tail.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml

from tests.helpers.net import free_port

from .conftest import RULES, require_binary

T = TypeVar("T")


def wait_for(check: Callable[[], T | None], timeout_s: float, what: str, interval_s: float = 0.5) -> T:
    """Poll ``check`` until it returns something truthy; fail after ``timeout_s`` naming ``what``."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except (httpx.HTTPError, OSError) as exc:
            last_error = exc
        time.sleep(interval_s)
    raise AssertionError(
        f"timed out after {timeout_s:g}s waiting for {what}" + (f" ({last_error})" if last_error else "")
    )


class _Process:
    name = "process"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.log_path = workdir / f"{self.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _start(self, argv: list[str], ready_path: str, timeout_s: float = 60) -> None:
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir)

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
            return httpx.get(self.url + ready_path, timeout=2).status_code == 200

        try:
            wait_for(ready, timeout_s, f"{self.name} on {self.url}")
        except AssertionError:
            self.stop()
            raise

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


class Prometheus(_Process):
    name = "prometheus"

    def start(self, config: dict[str, Any]) -> Prometheus:
        binary = require_binary("prometheus")
        config_path = self.workdir / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self._start(
            [
                binary,
                f"--config.file={config_path}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                "--enable-feature=exemplar-storage",
                "--rules.alert.resend-delay=1s",
                "--log.level=warn",
            ],
            "/-/ready",
        )
        return self

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; raises with Prometheus' error text when the expression is invalid."""
        response = httpx.post(self.url + "/api/v1/query", data={"query": expr}, timeout=30)
        body = response.json()
        if body.get("status") != "success":
            raise AssertionError(f"query failed: {body.get('error')}\n{expr}")
        return list(body["data"]["result"])

    def targets_up(self) -> bool:
        body = httpx.get(self.url + "/api/v1/targets", timeout=5).json()
        active = body["data"]["activeTargets"]
        return bool(active) and all(t["health"] == "up" for t in active)

    def rule_health(self) -> list[tuple[str, str, str]]:
        """(rule name, health, last error) of every loaded rule."""
        body = httpx.get(self.url + "/api/v1/rules", timeout=5).json()
        return [(r["name"], r["health"], r.get("lastError", "")) for g in body["data"]["groups"] for r in g["rules"]]


class Alertmanager(_Process):
    name = "alertmanager"

    def start(self, config: dict[str, Any]) -> Alertmanager:
        binary = require_binary("prometheus-alertmanager")
        config_path = self.workdir / "alertmanager.yml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self._start(
            [
                binary,
                f"--config.file={config_path}",
                f"--storage.path={self.workdir / 'am-data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",
                "--log.level=warn",
            ],
            "/-/ready",
        )
        return self


class Pushgateway(_Process):
    """The Debian ``prometheus-pushgateway`` on a loopback port. Its persistence file is in the
    test's own directory: the Debian build defaults ``--persistence.file`` to a file shared by every
    instance under /var/lib/prometheus, and an empty value does not turn that off."""

    name = "pushgateway"

    def start(self) -> Pushgateway:
        binary = require_binary("prometheus-pushgateway")
        self._start(
            [
                binary,
                f"--web.listen-address=127.0.0.1:{self.port}",
                f"--persistence.file={self.workdir / 'pushgateway.data'}",
                "--log.level=warn",
            ],
            "/-/ready",
        )
        return self

    def scrape_job(self, job_name: str = "pushgateway") -> dict[str, Any]:
        """A scrape config for this gateway; ``honor_labels`` keeps the pushed job/grouping labels."""
        return {"job_name": job_name, "honor_labels": True, "static_configs": [{"targets": [f"127.0.0.1:{self.port}"]}]}


def scrape_config(
    metrics_port: int, interval: str = "1s", alertmanager_port: int | None = None, rule_files: list[str] | None = None
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": rule_files or [],
        "scrape_configs": [{"job_name": "ragmon", "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}]}],
    }
    if alertmanager_port is not None:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{alertmanager_port}"]}]}]}
    return config


_DURATION = r"\d+[smhdw]"


def shrink_rules(
    windows: dict[str, str] | None,
    for_: str,
    interval: str,
    minimums: dict[int, int] | None = None,
    source: Path = RULES,
    day: str | None = None,
) -> str:
    """The real rules file with test-sized time: every range selector ``[X]`` mapped through
    ``windows`` (all of them must be mapped; None keeps them), every ``for:`` set to ``for_``, every group
    ``interval:`` set to ``interval``, and ``>= N`` minimum-count guards mapped through
    ``minimums``; with ``day`` (seconds, e.g. "20s"), every ``offset Nd`` becomes N test days (the
    drop alerts' same-hour baseline). Only durations and numbers change: the expressions keep their
    real shape."""
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    unmapped: set[str] = set()

    def window(match: re.Match[str]) -> str:
        if windows is None:
            return match[0]
        if match[1] not in windows:
            unmapped.add(match[1])
        return f"[{windows.get(match[1], match[1])}]"

    def test_days(match: re.Match[str]) -> str:
        return f"offset {int(match[1]) * float((day or '0s').rstrip('s')):g}s"

    def minimum(match: re.Match[str]) -> str:
        value = int(match[1])
        return f">= {(minimums or {}).get(value, value)}"

    for group in data["groups"]:
        group["interval"] = interval
        for rule in group["rules"]:
            expr = re.sub(rf"\[({_DURATION})\]", window, rule["expr"])
            if day is not None:
                expr = re.sub(r"offset (\d+)d\b", test_days, expr)
            rule["expr"] = re.sub(r">= (\d+)\b", minimum, expr)
            if "for" in rule:
                rule["for"] = for_
    assert not unmapped, f"range windows without a test mapping: {sorted(unmapped)}"
    return yaml.safe_dump(data, sort_keys=False, width=100_000)
