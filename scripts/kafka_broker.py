#!/usr/bin/env python3
"""A real single-node Apache Kafka broker (KRaft, broker+controller) for tests, CI and benchmarks.

Resolves ``org.apache.kafka:kafka_2.13`` and its runtime dependencies from Maven Central with
Maven into a cache directory, formats KRaft storage and runs ``kafka.Kafka`` with a small heap
on loopback ports. Standard library only, so CI can call it before any virtualenv exists::

    python3 scripts/kafka_broker.py fetch                 # resolve the jars (CI prepares with this)
    python3 scripts/kafka_broker.py run --port 9092       # foreground broker until Ctrl-C / SIGTERM
    python3 scripts/kafka_broker.py start --port 9092     # background; prints the bootstrap address
    python3 scripts/kafka_broker.py stop --data-dir DIR   # stop a background broker

Environment: ``RAGMON_KAFKA_HOME`` (jar cache, default ``<repo>/.cache/kafka``),
``RAGMON_KAFKA_VERSION`` (default below), ``RAGMON_KAFKA_HEAP`` (default ``512m``).
The test fixture in ``tests/kafka/conftest.py`` imports ``KafkaBroker`` from here.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

KAFKA_VERSION = os.environ.get("RAGMON_KAFKA_VERSION", "4.1.1")
# log4j-core is a Kafka runtime dependency; the slf4j binding is not, so add it for readable logs.
LOG4J_SLF4J = ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.24.3")
REPO_ROOT = Path(__file__).resolve().parent.parent
READY_MARKER = "Kafka Server started"

POM_TEMPLATE = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>ragmon.local</groupId>
  <artifactId>kafka-broker-classpath</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{kafka}</version>
    </dependency>
    <dependency>
      <groupId>{lg}</groupId><artifactId>{la}</artifactId><version>{lv}</version>
    </dependency>
  </dependencies>
</project>
"""

LOG4J2_PROPERTIES = """status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
"""


def cluster_id() -> str:
    """A random KRaft cluster id. Like Kafka's own ``Uuid.randomUuid``, never one that starts with
    "-": the storage tool's argument parser would read it as an option (1 run in 64 failed)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


class BrokerError(RuntimeError):
    pass


def kafka_home() -> Path:
    return Path(os.environ.get("RAGMON_KAFKA_HOME") or REPO_ROOT / ".cache" / "kafka")


def libs_dir(version: str = KAFKA_VERSION) -> Path:
    return kafka_home() / f"kafka_2.13-{version}" / "libs"


def ensure_jars(version: str = KAFKA_VERSION, quiet: bool = True) -> Path:
    """Resolve the broker's classpath with Maven once; later calls reuse the cache."""
    libs = libs_dir(version)
    done = libs / ".complete"
    if done.exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError("Maven ('mvn') is needed to fetch the Kafka jars (apt-get install maven)")
    if shutil.which("java") is None:
        raise BrokerError("Java 17+ is needed to run the broker (apt-get install openjdk-17-jre-headless)")
    staging = libs.with_name("libs.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="ragmon-kafka-pom-") as tmp:
        pom = Path(tmp) / "pom.xml"
        lg, la, lv = LOG4J_SLF4J
        pom.write_text(POM_TEMPLATE.format(kafka=version, lg=lg, la=la, lv=lv))
        cmd = [mvn, "-B", "-f", str(pom), "dependency:copy-dependencies",
               "-DincludeScope=runtime", f"-DoutputDirectory={staging}"]
        if quiet:
            cmd.insert(2, "-q")
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            output = result.stdout[-4000:] + result.stderr[-2000:]
            raise BrokerError(f"mvn failed ({result.returncode}):\n{output}")
    if not list(staging.glob(f"kafka_2.13-{version}.jar")):
        raise BrokerError(f"Maven did not produce kafka_2.13-{version}.jar in {staging}")
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    (libs / ".complete").write_text(version + "\n")
    return libs


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class KafkaBroker:
    """One KRaft node. ``stop()``/``start()`` keep the same ports and data directory, so a
    restart looks to clients like a broker outage, not a new cluster."""

    def __init__(self, data_dir: Path, port: int = 0, controller_port: int = 0,
                 version: str = KAFKA_VERSION, heap: str | None = None,
                 num_partitions: int = 4, extra: dict[str, str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.controller_port = controller_port or free_port()
        self.version = version
        self.heap = heap or os.environ.get("RAGMON_KAFKA_HEAP", "512m")
        self.num_partitions = num_partitions
        self.extra = extra or {}
        self.format_args: list[str] = []  # extra StorageTool format arguments, e.g. --add-scram
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "broker.log"

    @property
    def _props(self) -> Path:
        return self.data_dir / "server.properties"

    def _write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir / "log"),
            "num.partitions": str(self.num_partitions),
            "auto.create.topics.enable": "true",
            # single node: every internal topic with one replica, few partitions, no join delay
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "log.cleaner.enable": "false",
            **self.extra,
        }
        self._props.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.data_dir / "log4j2.properties").write_text(LOG4J2_PROPERTIES.format(log=self.log_file))

    def _java(self, main: str, *args: str, heap: str | None = None) -> list[str]:
        libs = ensure_jars(self.version)
        cmd = ["java", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
               f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
               "-cp", f"{libs}/*"]
        if heap:
            cmd[1:1] = [f"-Xmx{heap}", f"-Xms{min_heap(heap)}"]
        return [*cmd, main, *args]

    def format_storage(self) -> None:
        if (self.data_dir / "log" / "meta.properties").exists():
            return
        self._write_config()
        cid = cluster_id()
        result = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", cid, "-c", str(self._props), *self.format_args,
                       heap="128m"),
            capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BrokerError(f"kafka-storage format failed:\n{result.stdout}{result.stderr}")

    def start(self, timeout_s: float = 90.0) -> None:
        if self.running:
            return
        self.format_storage()
        self._write_config()
        offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        with open(self.data_dir / "stdout.log", "ab") as out:
            self.proc = subprocess.Popen(
                self._java("kafka.Kafka", str(self._props), heap=self.heap),
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        (self.data_dir / "broker.pid").write_text(f"{self.proc.pid}\n")
        self.wait_ready(timeout_s, log_offset=offset)

    def wait_ready(self, timeout_s: float, log_offset: int = 0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise BrokerError(f"broker exited with {self.proc.returncode}; see {self.log_file}\n"
                                  + self._tail())
            if self._log_since(log_offset).find(READY_MARKER) >= 0 and _port_open(self.port):
                return
            time.sleep(0.2)
        raise BrokerError(f"broker not ready after {timeout_s}s; see {self.log_file}\n" + self._tail())

    def _log_since(self, offset: int) -> str:
        try:
            with open(self.log_file, "rb") as fh:
                fh.seek(offset)
                return fh.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def _tail(self, n: int = 4000) -> str:
        text = self._log_since(0)
        with contextlib.suppress(FileNotFoundError):
            text += (self.data_dir / "stdout.log").read_text(errors="replace")
        return text[-n:]

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 30.0) -> None:
        """Controlled shutdown (SIGTERM); SIGKILL if it takes longer than ``timeout_s``."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        # the ports must be free again before a restart can bind them
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (_port_open(self.port) or _port_open(self.controller_port)):
            time.sleep(0.1)

    def restart(self, timeout_s: float = 90.0) -> None:
        self.stop()
        self.start(timeout_s)


def min_heap(heap: str) -> str:
    return "128m" if heap.endswith(("m", "g")) else heap


def _cmd_fetch(args: argparse.Namespace) -> int:
    libs = ensure_jars(args.version, quiet=not args.verbose)
    jars = len(list(libs.glob("*.jar")))
    print(f"kafka {args.version}: {jars} jars in {libs}")
    return 0


def _broker_from(args: argparse.Namespace) -> KafkaBroker:
    data = Path(args.data_dir or tempfile.mkdtemp(prefix="ragmon-kafka-"))
    return KafkaBroker(data, port=args.port, controller_port=args.controller_port,
                       version=args.version, num_partitions=args.partitions)


def _cmd_run(args: argparse.Namespace) -> int:
    broker = _broker_from(args)
    stop = False

    def _term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    broker.start()
    print(f"kafka ready at {broker.bootstrap} (data {broker.data_dir})", flush=True)
    while not stop and broker.running:
        time.sleep(0.5)
    broker.stop()
    return 0


def _cmd_start(args: argparse.Namespace) -> int:
    broker = _broker_from(args)
    broker.start()
    # detach: the broker runs in its own session; `stop` finds it through broker.pid
    broker.proc = None
    print(broker.bootstrap)
    print(f"data dir: {broker.data_dir}", file=sys.stderr)
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    pid_file = Path(args.data_dir) / "broker.pid"
    if not pid_file.exists():
        print(f"no broker.pid in {args.data_dir}", file=sys.stderr)
        return 1
    pid = int(pid_file.read_text().strip())
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        for _ in range(300):
            os.kill(pid, 0)
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default=KAFKA_VERSION, help="Apache Kafka version (Maven Central)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    fetch = sub.add_parser("fetch", help="resolve the broker jars into $RAGMON_KAFKA_HOME")
    fetch.add_argument("--verbose", action="store_true")
    fetch.set_defaults(func=_cmd_fetch)
    for name, func in (("run", _cmd_run), ("start", _cmd_start)):
        p = sub.add_parser(name, help=f"{name} a broker")
        p.add_argument("--port", type=int, default=0, help="client port (0 = a free one)")
        p.add_argument("--controller-port", type=int, default=0)
        p.add_argument("--data-dir", default=None, help="storage dir (default: a new temp dir)")
        p.add_argument("--partitions", type=int, default=4, help="default partitions for new topics")
        p.set_defaults(func=func)
    stop = sub.add_parser("stop", help="stop a broker started with `start`")
    stop.add_argument("--data-dir", required=True)
    stop.set_defaults(func=_cmd_stop)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except BrokerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
