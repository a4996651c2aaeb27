#!/usr/bin/env python3
"""A real OpenTelemetry Collector for tests, CI and the shipped configs' checks.

Builds ``scripts/otelcol/`` (main.go over ``otelcol.NewCommand``: the OTLP receiver, the
memory limiter and batch processors, the contrib Kafka and ``load_balancing`` exporters; versions
pinned in its go.mod and go.sum: the ``load_balancing`` exporter is contrib v0.161.0, built against the
v0.165 core like the rest, because the Go module proxy serves no later version of that module —
v0.162.0 to v0.165.1 are refused) with the Go toolchain into a cache directory, once per source: the binary's name
carries a hash of main.go, go.mod and go.sum, so a version bump builds anew and nothing stale is
run. Standard library only, so CI can call it before any virtualenv exists::

    python3 scripts/otelcol.py build               # build (or reuse) and print the binary's path
    python3 scripts/otelcol.py path                # the cached binary's path; exit 1 if not built
    python3 scripts/otelcol.py validate FILE...    # `otelcol validate --config FILE` for each

Environment: ``RAGMON_OTELCOL_HOME`` (binary cache, default ``<repo>/.cache/otelcol``); Go's own
``GOMODCACHE``/``GOCACHE`` keep the downloaded modules and compiled packages between builds.
The Kafka tests import ``ensure_binary`` and ``OtelCollector`` from here; the load-balancing test
(``tests/ops/test_loadbalancing.py``) runs ``deploy/otel-collector/loadbalancing.yaml`` with it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIR = Path(__file__).resolve().parent / "otelcol"
SOURCES = ("main.go", "go.mod", "go.sum")
BINARY = "otelcol-ragmon"
#: The Collector release the binary is built from (go.mod pins every module; this names it).
COLLECTOR_VERSION = "0.165.0"
BUILD_TIMEOUT_S = 1800
GO_FALLBACKS = ("/usr/local/go/bin/go", "/usr/lib/go/bin/go")  # installed but not on PATH


class CollectorError(RuntimeError):
    pass


def otelcol_home() -> Path:
    return Path(os.environ.get("RAGMON_OTELCOL_HOME") or REPO_ROOT / ".cache" / "otelcol")


def source_hash() -> str:
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(name.encode() + b"\0" + (SOURCE_DIR / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def binary_path() -> Path:
    return otelcol_home() / f"{BINARY}-{COLLECTOR_VERSION}-{source_hash()}"


def ensure_binary(quiet: bool = True) -> Path:
    """Build the Collector once per source; later calls reuse the cached binary."""
    target = binary_path()
    if target.exists():
        return target
    go = shutil.which("go") or next((g for g in GO_FALLBACKS if os.access(g, os.X_OK)), None)
    if go is None:
        raise CollectorError("Go is needed to build the OpenTelemetry Collector for the tests "
                             "(https://go.dev/doc/install, or apt-get install golang-go >= 1.26)")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(target.name + ".partial")
    cmd = [go, "build", "-buildvcs=false", "-trimpath", "-ldflags=-s -w", "-o", str(staging), "."]
    if not quiet:
        print(f"otelcol: building the Collector {COLLECTOR_VERSION} from {SOURCE_DIR} "
              "(a few minutes the first time)", file=sys.stderr, flush=True)
    # -mod=readonly: go.sum is the pin; a build never edits the repository's go.mod or go.sum.
    env = {**os.environ, "GOFLAGS": (os.environ.get("GOFLAGS", "") + " -mod=readonly").strip()}
    result = subprocess.run(cmd, cwd=SOURCE_DIR, env=env, capture_output=True, text=True,
                            timeout=BUILD_TIMEOUT_S, check=False)
    if result.returncode != 0:
        staging.unlink(missing_ok=True)
        raise CollectorError(f"go build failed ({result.returncode}):\n{result.stdout[-3000:]}{result.stderr[-4000:]}")
    staging.rename(target)
    for old in target.parent.glob(f"{BINARY}-*"):  # one cached build: older sources' binaries go
        if old != target:
            old.unlink(missing_ok=True)
    return target


def validate(config: Path, binary: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``otelcol validate``: decode the config against the built components, without running it."""
    exe = binary or ensure_binary()
    return subprocess.run([str(exe), "validate", f"--config=file:{Path(config).resolve()}"],
                          capture_output=True, text=True, timeout=120, check=False)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def kafka_config(bootstrap: str, topic: str, http_port: int, grpc_port: int,
                 encoding: str = "otlp_proto", batch_timeout: str = "200ms") -> str:
    """A Collector config for tests: OTLP on loopback -> memory_limiter -> batch -> Kafka, the
    exporter spelled as deploy/otel-collector/config.yaml spells it; no self-telemetry port."""
    brokers = ", ".join(f'"{b.strip()}"' for b in bootstrap.split(","))
    return f"""receivers:
  otlp:
    protocols:
      grpc: {{endpoint: "127.0.0.1:{grpc_port}"}}
      http: {{endpoint: "127.0.0.1:{http_port}"}}
processors:
  memory_limiter: {{check_interval: 1s, limit_mib: 256, spike_limit_mib: 64}}
  batch: {{send_batch_size: 512, timeout: {batch_timeout}}}
exporters:
  kafka:
    brokers: [{brokers}]
    protocol_version: 3.7.0
    traces: {{topic: "{topic}", encoding: {encoding}}}
    partition_traces_by_id: true
    producer: {{compression: zstd}}
    retry_on_failure: {{enabled: true}}
    sending_queue: {{enabled: true, queue_size: 1000}}
service:
  telemetry:
    metrics: {{level: none}}
  pipelines:
    traces:
      receivers: [otlp]
      processors: [memory_limiter, batch]
      exporters: [kafka]
"""


class OtelCollector:
    """One Collector process on loopback ports, writing spans to a Kafka topic."""

    def __init__(self, work_dir: Path, bootstrap: str, topic: str, encoding: str = "otlp_proto",
                 binary: Path | None = None) -> None:
        self.work_dir = Path(work_dir)
        self.binary = binary or ensure_binary()
        self.http_port, self.grpc_port = free_port(), free_port()
        self.config = self.work_dir / f"otelcol-{topic}.yaml"
        self.log_file = self.work_dir / f"otelcol-{topic}.log"
        self.config_text = kafka_config(bootstrap, topic, self.http_port, self.grpc_port, encoding)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def traces_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/v1/traces"

    def start(self, timeout_s: float = 60.0) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.config.write_text(self.config_text)
        with open(self.log_file, "ab") as out:
            self.proc = subprocess.Popen([str(self.binary), f"--config=file:{self.config}"],
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not (_port_open(self.http_port) and _port_open(self.grpc_port)):
            if self.proc.poll() is not None:
                raise CollectorError(f"otelcol exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise CollectorError(f"otelcol not listening after {timeout_s}s:\n{self.log()[-4000:]}")
            time.sleep(0.1)

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM: the Collector drains its batch and queue to Kafka, then exits."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def __enter__(self) -> OtelCollector:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _cmd_build(args: argparse.Namespace) -> int:
    path = ensure_binary(quiet=False)
    print(path)
    return 0


def _cmd_path(args: argparse.Namespace) -> int:
    path = binary_path()
    if not path.exists():
        print(f"otelcol: not built ({path}); run `python3 scripts/otelcol.py build`", file=sys.stderr)
        return 1
    print(path)
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    failed = 0
    for config in args.configs:
        result = validate(Path(config))
        status = "ok" if result.returncode == 0 else "INVALID"
        print(f"{status}: {config}")
        if result.returncode != 0:
            failed += 1
            print((result.stdout + result.stderr).strip(), file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build the Collector once (cached) and print its path").set_defaults(func=_cmd_build)
    sub.add_parser("path", help="print the cached binary's path").set_defaults(func=_cmd_path)
    p = sub.add_parser("validate", help="otelcol validate each config")
    p.add_argument("configs", nargs="+")
    p.set_defaults(func=_cmd_validate)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except CollectorError as exc:
        print(f"otelcol: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
