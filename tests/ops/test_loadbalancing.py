"""Scale-out without Kafka: the shipped ``deploy/otel-collector/loadbalancing.yaml`` run by the real
OpenTelemetry Collector (``scripts/otelcol.py``, with the contrib ``load_balancing`` exporter), routing
by trace ID to two real ``ragmon agent`` processes over OTLP/gRPC (bearer token in the metadata, as
shipped).

The app is the hand-off tests' (``tests/kafka/split_app.py``): ragmon's SDK with its default export
(every 5 s), LLM calls of 0.3-2.0 s, 8 in flight, so traces are exported in parts. It sends through a
tap that forwards each OTLP/HTTP export to the Collector unchanged and notes which traces it held, so
the test sees the parts. The agents write what they judge (``--export-judged``).

* Without a restart: every trace judged exactly once, on whole data (its 3 documents and its answer).
* One agent restarted mid-stream (SIGTERM, a new process on the same address, as a StatefulSet pod
  comes back under its name): what is lost, judged on partial data or judged twice is measured with
  the agents' and the Collector's own counters and written to ``$RAGMON_LB_REPORT`` when set
  (docs/deploying.md quotes it); asserted: nothing is judged twice, nothing on partial data, every
  trace the restart did not touch is judged, and every trace that is not judged is counted by an agent.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragmon import semconv as sc
from tests.helpers.eventually import eventually
from tests.helpers.net import free_port
from tests.helpers.scrape import Scrape

from .conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
from otelcol import ensure_binary

pytestmark = pytest.mark.timeout(900)

CONFIG = REPO / "deploy" / "otel-collector" / "loadbalancing.yaml"
REQUESTS = 200
RATE = 6.0  # requests started per second: about 35 s of traffic, 8 in flight at most
TOKEN = "lb-test-token"
TRACE_TIMEOUT_S = 20  # as the Kafka hand-off tests: a trace waits this long for a missing part



def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def get_scrape(port: int) -> Scrape | None:
    try:
        response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
        response.raise_for_status()
        return Scrape(response.text)
    except httpx.HTTPError:
        return None


class AgentProc:
    """``ragmon agent`` with OTLP/HTTP and OTLP/gRPC receivers on fixed loopback ports; a restart is
    a new process on the same ports (the Collector's static resolver names the address)."""

    def __init__(self, name: str, work: Path) -> None:
        self.name, self.work = name, work
        self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        self.generation = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.final: dict[str, Scrape] = {}  # each stopped generation's last scrape

    @property
    def label(self) -> str:
        return f"{self.name}{self.generation}"

    def judged_file(self, label: str) -> Path:
        return self.work / f"judged-{label}.jsonl"

    def start(self) -> None:
        self.generation += 1
        cmd = [sys.executable, "-m", "ragmon", "agent", "--source", "http", "--receiver-host", "127.0.0.1",
               "--receiver-port", str(self.http_port), "--receiver-grpc-port", str(self.grpc_port),
               "--metrics-port", str(self.metrics_port), "--judge", "local", "--sample-rate", "1.0",
               "--judge-concurrency", "2", "--trace-timeout-s", str(TRACE_TIMEOUT_S), "--shutdown-grace-s", "20",
               "--shutdown-final-scrape-s", "10", "--export-judged", str(self.judged_file(self.label))]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGMON_", "OTEL_"))}
        env.update(PYTHONPATH=str(REPO), RAGMON_RECEIVER_BEARER_TOKEN=TOKEN)
        with open(self.work / f"agent-{self.label}.log", "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)

    def scrape(self) -> Scrape | None:
        return get_scrape(self.metrics_port)

    def ready(self) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{self.metrics_port}/readyz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> int:
        """SIGTERM, scraping until the process is gone: the last scrape is the final accounting
        (``--shutdown-final-scrape-s`` keeps /metrics up for it)."""
        assert self.proc is not None
        label = self.label
        self.proc.send_signal(signal.SIGTERM)
        last = None
        while self.proc.poll() is None:
            last = self.scrape() or last
            time.sleep(0.2)
        assert last is not None, f"agent {label}: no scrape during shutdown"
        self.final[label] = last
        return self.proc.wait()

    def records(self) -> list[dict[str, Any]]:
        out = []
        for n in range(1, self.generation + 1):
            path = self.judged_file(f"{self.name}{n}")
            if path.exists():
                for line in path.read_text().splitlines():
                    if line.strip():
                        out.append({**json.loads(line), "agent": f"{self.name}{n}"})
        return out

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class LoadBalancer:
    """The shipped Collector config with loopback addresses: the receivers, the two agents as the
    static resolver's hostnames, and the Collector's own metrics on a loopback port."""

    def __init__(self, work: Path, agents: list[AgentProc]) -> None:
        config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
        self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        protocols = config["receivers"]["otlp"]["protocols"]
        protocols["http"]["endpoint"] = f"127.0.0.1:{self.http_port}"
        protocols["grpc"]["endpoint"] = f"127.0.0.1:{self.grpc_port}"
        static = config["exporters"]["load_balancing"]["resolver"]["static"]
        assert len(static["hostnames"]) == len(agents)
        static["hostnames"] = [f"127.0.0.1:{a.grpc_port}" for a in agents]
        config["service"]["telemetry"] = {"metrics": {"level": "detailed", "readers": [
            {"pull": {"exporter": {"prometheus": {"host": "127.0.0.1", "port": self.metrics_port}}}}]}}
        self.config = work / "otelcol-lb.yaml"
        self.config.write_text(yaml.safe_dump(config))
        self.log = work / "otelcol-lb.log"
        env = {**os.environ, "RAGMON_RECEIVER_BEARER_TOKEN": TOKEN}
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([str(ensure_binary()), f"--config=file:{self.config}"], stdout=out,
                                         stderr=subprocess.STDOUT, env=env, start_new_session=True)

    @property
    def traces_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/v1/traces"

    def scrape(self) -> Scrape | None:
        return get_scrape(self.metrics_port)

    def counters(self) -> dict[str, float]:
        """The Collector's own account of what it sent to the agents and what it gave up on."""
        s = self.scrape()
        assert s is not None
        names = {n for n, _, _ in s.samples if n.startswith("otelcol_")}
        out = {}
        for name in sorted(names):
            if any(k in name for k in ("exporter_sent_spans", "exporter_send_failed_spans", "enqueue_failed_spans",
                                       "receiver_accepted_spans", "receiver_refused_spans", "queue_size",
                                       "loadbalancer_backend_outcome")):
                out[name] = s.value(name)
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class Tap:
    """An OTLP/HTTP hop between the app and the Collector: forwards each export as it came and notes
    the trace ids it held, so the test can tell which traces reached the Collector in parts."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.parts: collections.Counter[str] = collections.Counter()
        self.port = free_port()
        self._runner: web.AppRunner | None = None
        self._client: httpx.AsyncClient | None = None

    async def _forward(self, request: web.Request) -> web.Response:
        body = await request.read()
        export = ExportTraceServiceRequest.FromString(body)
        self.parts.update({s.trace_id.hex() for rs in export.resource_spans for ss in rs.scope_spans
                           for s in ss.spans})
        assert self._client is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "content-encoding")}
        reply = await self._client.post(self.upstream, content=body, headers=headers)
        return web.Response(body=reply.content, status=reply.status_code,
                            content_type=reply.headers.get("content-type", "application/x-protobuf"))

    async def __aenter__(self) -> Tap:
        self._client = httpx.AsyncClient(timeout=30)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/traces", self._forward)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._client is not None:
            await self._client.aclose()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"


class App:
    """``tests/kafka/split_app.py`` in its own process (the SDK sets OpenTelemetry's global provider)."""

    def __init__(self, endpoint: str, work: Path) -> None:
        self.out = work / "sent.txt"
        self.err = work / "app.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGMON_", "OTEL_"))}
        env["PYTHONPATH"] = str(REPO)
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.kafka.split_app", "--endpoint", endpoint,
                 "--requests", str(REQUESTS), "--rate", str(RATE)], stdout=out, stderr=err, env=env, cwd=REPO)

    def sent(self) -> list[str]:
        return [line for line in self.out.read_text().split() if line]

    async def finish(self) -> list[str]:
        code = await asyncio.to_thread(self.proc.wait, 300)
        assert code == 0, self.err.read_text()[-3000:]
        return self.sent()


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[list[AgentProc], Path]]:
    agents = [AgentProc("a", tmp_path), AgentProc("b", tmp_path)]
    try:
        yield agents, tmp_path
    finally:
        for agent in agents:
            agent.kill()


def accounted(s: Scrape) -> bool:
    """Nothing open, nothing in the judge, and every received trace accounted for."""
    received = s.value(f"{sc.M_TRACES_RECEIVED}_total")
    done = sum(s.value(f"{m}_total") for m in (sc.M_TRACES_SCORED, sc.M_TRACES_SKIPPED, sc.M_TRACES_FAILED))
    return s.value(sc.M_OPEN_TRACES) == 0 and s.value(sc.M_JUDGE_BACKLOG) == 0 and received == done


async def settle(agents: list[AgentProc], lb: LoadBalancer, stopped: dict[str, Scrape],
                 timeout_s: float = TRACE_TIMEOUT_S * 6) -> dict[str, Scrape]:
    """Wait until every span the Collector accepted has reached an agent (the exporter of an agent that
    was down retries until it is back) and every live agent has accounted for all it got (a trace still
    waiting for a part closes after TRACE_TIMEOUT_S); the final scrapes, stopped agents' included."""

    def check() -> dict[str, Scrape] | None:
        lb_scrape = lb.scrape()
        if lb_scrape is None:
            return None
        scrapes = {**stopped, **{a.label: a.scrape() for a in agents}}
        if any(s is None for s in scrapes.values()):
            return None
        delivered = sum(s.value(f"{sc.M_SPANS_RECEIVED}_total") for s in scrapes.values() if s is not None)
        if delivered < lb_scrape.value("otelcol_receiver_accepted_spans_total") or delivered == 0:
            return None
        if not all(accounted(scrapes[a.label]) for a in agents):  # type: ignore[arg-type]
            return None
        return {k: v for k, v in scrapes.items() if v is not None}

    return await eventually(check, timeout_s=timeout_s, interval_s=0.5,
                            what="every span the Collector accepted delivered and every agent's traces accounted for")


def totals(scrapes: dict[str, Scrape]) -> dict[str, float]:
    """The agents' counters summed over every process that ran (final scrapes of stopped ones)."""
    out: collections.Counter[str] = collections.Counter()
    for s in scrapes.values():
        for name, labels, value in s.samples:
            if name in (f"{sc.M_TRACES_RECEIVED}_total", f"{sc.M_TRACES_SCORED}_total",
                        f"{sc.M_SPANS_RECEIVED}_total"):
                out[name.removeprefix("ragmon_")] += value
            elif name in (f"{sc.M_TRACES_SKIPPED}_total", f"{sc.M_TRACES_FAILED}_total",
                          f"{sc.M_TRACES_INCOMPLETE}_total", f"{sc.M_DROPPED}_total"):
                out[f"{name.removeprefix('ragmon_')}{{reason={labels['reason']}}}"] += value
            elif name == f"{sc.M_REQUESTS_RECEIVED}_total" and labels.get("source") == "grpc":
                out[f"receiver_requests_total{{grpc,{labels['outcome']}}}"] += value
    return {k: v for k, v in sorted(out.items()) if v}


def whole(record: dict[str, Any]) -> bool:
    return len(record["documents"]) == 3 and bool(record["answer"]) and bool(record["question"])


async def start_agents(agents: list[AgentProc]) -> None:
    for agent in agents:
        agent.start()
    for agent in agents:
        await eventually(agent.ready, timeout_s=180, interval_s=0.5, what=f"agent {agent.label} ready")


async def test_two_agents_behind_the_load_balancer_judge_every_trace_once_on_whole_data(
        stack: tuple[list[AgentProc], Path]) -> None:
    agents, work = stack
    await start_agents(agents)
    lb = LoadBalancer(work, agents)
    try:
        async with Tap(lb.traces_endpoint) as tap:
            await eventually(lambda: lb.scrape() is not None, timeout_s=60, what="the Collector up")
            sent = await App(tap.endpoint, work).finish()
            final = await settle(agents, lb, {})
            collector = lb.counters()
            cpu = {"collector": cpu_seconds(lb.proc.pid),
                   **{a.label: cpu_seconds(a.proc.pid) for a in agents if a.proc is not None}}
    finally:
        lb.stop()
    records = [r for a in agents for r in a.records()]
    counts = collections.Counter(r["trace_id"] for r in records)
    assert len(sent) == REQUESTS and len(set(sent)) == REQUESTS
    assert sorted(counts) == sorted(sent), "every trace judged"
    assert [t for t, n in counts.items() if n > 1] == [], "none twice"
    assert [r["trace_id"] for r in records if not whole(r)] == [], "none on part of its data"
    by_agent = collections.Counter(r["agent"] for r in records)
    assert by_agent["a1"] and by_agent["b1"], f"both agents judged: {by_agent}"
    # routed by trace id: each trace went to one agent only, whatever parts it came in
    split = [t for t, n in tap.parts.items() if n > 1]
    assert len(split) >= 5, f"only {len(split)} of {len(sent)} traces were exported in parts"
    agent_totals = totals(final)
    assert agent_totals["traces_received_total"] == REQUESTS, agent_totals
    assert agent_totals["traces_scored_total"] == REQUESTS, agent_totals
    report("no_restart", sent=len(sent), split=len(split), by_agent=dict(by_agent), agents=agent_totals,
           collector=collector, cpu_seconds={k: round(v, 1) for k, v in cpu.items()})
    for agent in agents:
        assert agent.stop() == 0


async def test_one_agent_restarted_mid_stream(stack: tuple[list[AgentProc], Path]) -> None:
    agents, work = stack
    a, b = agents
    await start_agents(agents)
    lb = LoadBalancer(work, agents)
    try:
        async with Tap(lb.traces_endpoint) as tap:
            await eventually(lambda: lb.scrape() is not None, timeout_s=60, what="the Collector up")
            app = App(tap.endpoint, work)
            await eventually(lambda: len(b.records()) >= 20, timeout_s=180, interval_s=0.2,
                             what="agent b judging")
            sent_before = len(app.sent())
            assert await asyncio.to_thread(b.stop) == 0  # SIGTERM: b accounts for what it holds, exits 0
            stopped_at = len(app.sent())
            b.start()  # the same address: the Collector's exporter for b retried meanwhile
            await eventually(b.ready, timeout_s=180, interval_s=0.5, what="agent b back")
            back_at = len(app.sent())
            sent = await app.finish()
            final = await settle(agents, lb, b.final, timeout_s=420)
            collector = lb.counters()
            split = [t for t, n in tap.parts.items() if n > 1]
    finally:
        lb.stop()
    records = [r for agent in agents for r in agent.records()]
    counts = collections.Counter(r["trace_id"] for r in records)
    agent_totals = totals(final)
    not_judged = sorted(set(sent) - set(counts))
    partial = [r["trace_id"] for r in records if not whole(r)]
    twice = [t for t, n in counts.items() if n > 1]
    by_agent = collections.Counter(r["agent"] for r in records)
    report("restart", sent=len(sent), split=len(split), restart_window_sent=[sent_before, stopped_at, back_at],
           judged=len(counts), not_judged=len(not_judged), partial=len(partial), twice=len(twice),
           not_judged_in_parts=sum(1 for t in not_judged if tap.parts[t] > 1), by_agent=dict(by_agent),
           agents=agent_totals, collector=collector)
    assert len(sent) == REQUESTS
    assert twice == [], "none judged twice"
    assert partial == [], "none judged on part of its data"
    assert set(counts) <= set(sent)
    assert by_agent["a1"] and by_agent["b1"] and by_agent["b2"], by_agent
    # what was not judged was counted: each such trace reached an agent and was skipped there
    # (incomplete: a part missing, or no_answer/no_question: its other part was at the other process)
    skipped = sum(v for k, v in agent_totals.items() if k.startswith("traces_skipped_total"))
    assert len(not_judged) <= skipped, agent_totals
    # agent a, never restarted, judged every trace it received
    a_final = final["a1"]
    assert a_final.value(f"{sc.M_TRACES_SCORED}_total") == a_final.value(f"{sc.M_TRACES_RECEIVED}_total") > 0
    assert a.stop() == 0 and b.stop() == 0


def report(case: str, **numbers: object) -> None:
    """Append the measured numbers to $RAGMON_LB_REPORT (docs/deploying.md quotes a run)."""
    path = os.environ.get("RAGMON_LB_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"case": case, **numbers}, sort_keys=True) + "\n")
