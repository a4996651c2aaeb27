"""Runs the demo: agent (in-process or external) + SDK + the demo app's traffic + the summary.

Flow: start the agent (``judge="local"``), point ``ragmon.init`` at its receiver, send
requests at ``rate``/s from a thread pool for ``duration`` seconds (each with a failure
drawn from the configured shares), refresh the summary about once a second, then flush
the SDK, wait for the agent to judge what is left, and print the final summary.
Ctrl-C (or SIGTERM) ends the traffic early and still prints the final summary; a second
Ctrl-C skips the wait for the judge.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import random
import shutil
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TextIO

import ragmon

from .. import quality
from ..errors import ConfigError
from .app import DemoAnswer, DemoRag
from .corpus import load_corpus
from .failures import FailureKind, FailureMix
from .summary import AgentCounts, DemoView, progress_line, render
from .tracker import DEFAULT_SLOW_THRESHOLD_S, DemoTracker

log = logging.getLogger("ragmon.demo")

SERVICE_NAME = "ragmon-demo"
_MAX_WORKERS = 32  # slow retrievals hold a worker for up to ~1.5 s
_IDLE_WAIT_S = 20.0  # after the traffic: how long to wait for the judge to finish


@dataclass(frozen=True, slots=True)
class DemoOptions:
    duration_s: float = 30.0
    rate: float = 5.0
    seed: int = 1
    shares: dict[FailureKind, float] | None = None
    sample_rate: float = 0.8
    metrics_port: int = 9464
    receiver_port: int = 0
    agent_mode: str = "inprocess"  # or "external"
    otlp_endpoint: str | None = None
    metrics_url: str | None = None  # external mode: where to read the agent's counters
    summary_json: str | None = None
    live: bool | None = None  # None: live screen when stdout is a terminal
    slow_threshold_s: float = DEFAULT_SLOW_THRESHOLD_S
    extra_agent_settings: dict[str, Any] = field(default_factory=dict)
    linger_s: float = 0.0  # in-process: keep /metrics and /worst up this long after the final summary


class _Stop:
    """Set by the duration, the first Ctrl-C/SIGTERM (``early``), or a second one (``hard``)."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.early = False
        self.hard = False
        self.count = 0

    def signal(self) -> None:
        self.count += 1
        if self.event.is_set():
            self.hard = True
        self.early = True
        self.event.set()


class DemoRunner:
    def __init__(self, options: DemoOptions, out: TextIO | None = None) -> None:
        self.o = options
        self.out = out or sys.stdout
        self.live = options.live if options.live is not None else self.out.isatty()
        self.color = self.live and "NO_COLOR" not in os.environ
        self.mix = FailureMix(options.shares)
        self.agent: Any = None
        self.tracker: DemoTracker | None = None
        self._started = 0.0
        self._errors = 0

    # ------------------------------------------------------------------ entry point
    async def run(self) -> int:
        stop = _Stop()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.signal)
        try:
            if self.o.agent_mode == "external":
                return await self._run_external(stop)
            return await self._run_inprocess(stop)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)

    async def _run_inprocess(self, stop: _Stop) -> int:
        from prometheus_client import CollectorRegistry

        from ..agent import Agent
        from ..config import load_agent_config

        settings = {
            "source": "http", "judge": "local", "receiver_port": self.o.receiver_port,
            "metrics_port": self.o.metrics_port, "sample_rate": self.o.sample_rate,
            **self.o.extra_agent_settings,
        }
        config = load_agent_config(settings)
        thresholds = config.diagnosis_thresholds()
        self.tracker = DemoTracker(thresholds, self.o.slow_threshold_s)
        self._say("ragmon demo: starting the agent and loading the local judge model …")
        agent = Agent(config, registry=CollectorRegistry())
        try:
            await agent.start()
        except (OSError, ConfigError) as exc:  # a busy port (the servers raise ConfigError)
            ports = " or ".join(str(p) for p in (config.metrics_port, config.receiver_port) if p)
            self._say(f"ragmon demo: cannot start the agent: {exc}\n"
                      f"  Is something (another agent, an earlier demo) already using port {ports}? "
                      "Pass --metrics-port 0 (and --receiver-port 0) to use free ports.", err=True)
            with contextlib.suppress(Exception):
                await agent.stop()
            return 2
        self.agent = agent
        agent.add_listener(self.tracker.on_scores)
        endpoint = f"http://127.0.0.1:{agent.receiver_port}/v1/traces"
        metrics_url = f"http://{config.metrics_host}:{agent.metrics_port}"
        try:
            report = await self._drive(stop, endpoint, metrics_url, config.sample_rate)
        finally:
            await agent.stop()
        return report

    async def _run_external(self, stop: _Stop) -> int:
        if not self.o.otlp_endpoint:
            self._say("ragmon demo: --agent external needs --otlp-endpoint URL "
                      "(e.g. http://127.0.0.1:4318/v1/traces)", err=True)
            return 2
        self.tracker = DemoTracker(slow_threshold_s=self.o.slow_threshold_s)
        return await self._drive(stop, self.o.otlp_endpoint, self.o.metrics_url, None)

    # ------------------------------------------------------------------ traffic + summary
    async def _drive(self, stop: _Stop, endpoint: str, metrics_url: str | None, sample_rate: float | None) -> int:
        assert self.tracker is not None
        # Export every ~200 ms instead of the SDK's 5 s, so the live view moves (standard OTel variable).
        os.environ.setdefault("OTEL_BSP_SCHEDULE_DELAY", "200")
        ragmon.init(service_name=SERVICE_NAME, endpoint=endpoint)
        rag = DemoRag(seed=self.o.seed)
        rng = random.Random(self.o.seed)
        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(max_workers=_MAX_WORKERS, thread_name_prefix="ragmon-demo")
        pending: set[asyncio.Future[DemoAnswer]] = set()
        self._started = time.monotonic()
        refresh = asyncio.create_task(self._refresh(stop, endpoint, metrics_url, sample_rate))
        try:
            n = 0
            while not stop.event.is_set():
                due = self._started + n / self.o.rate
                if due >= self._started + self.o.duration_s:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.event.wait(), max(0.0, due - time.monotonic()))
                if stop.event.is_set():
                    break
                question = rng.choice(rag.questions).question
                kind = self.mix.pick(rng)
                request = functools.partial(rag.ask, question, kind, seed=rng.getrandbits(64))
                future = loop.run_in_executor(pool, request)
                future.add_done_callback(self._done)
                pending.add(future)
                future.add_done_callback(pending.discard)
                n += 1
            elapsed = time.monotonic() - self._started
            if pending:
                await asyncio.wait(pending, timeout=5.0)
            # Send what the SDK still buffers, then let the agent judge it.
            if not self.live:
                self._say(f"ragmon demo: traffic done after {elapsed:.0f} s; waiting for the agent to judge the rest …")
            await asyncio.to_thread(ragmon.shutdown)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            refresh.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refresh
        if self.agent is not None and not stop.hard:
            waiter = asyncio.create_task(self.agent.wait_idle(_IDLE_WAIT_S))
            hard = asyncio.create_task(self._until_hard(stop))
            await asyncio.wait({waiter, hard}, return_when=asyncio.FIRST_COMPLETED)
            for task in (waiter, hard):
                task.cancel()
        view = await self._view(endpoint, metrics_url, sample_rate, elapsed, final=True, early=stop.early)
        if self.live:
            self.out.write("\x1b[H\x1b[2J")
        self.out.write(render(view, color=self.color) + "\n")
        self.out.flush()
        if self.o.summary_json:
            self._write_json(view)
        if self.agent is not None and self.o.linger_s > 0 and not stop.hard:
            await self._linger(stop)
        return 0

    async def _linger(self, stop: _Stop) -> None:
        """Keep the in-process agent (and its URLs) up after the summary, until the time is up
        or the next Ctrl-C/SIGTERM."""
        signals = stop.count
        deadline = time.monotonic() + self.o.linger_s
        while time.monotonic() < deadline and stop.count == signals:  # noqa: ASYNC110  # set by a signal handler
            await asyncio.sleep(0.1)

    async def _until_hard(self, stop: _Stop) -> None:
        while not stop.hard:  # noqa: ASYNC110  # polls a flag set from a signal handler thread
            await asyncio.sleep(0.1)

    def _done(self, future: asyncio.Future[DemoAnswer]) -> None:
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            self._errors += 1
            if self._errors == 1:
                log.warning("demo request failed: %r", exc)
            return
        assert self.tracker is not None
        self.tracker.record_request(future.result())

    async def _refresh(self, stop: _Stop, endpoint: str, metrics_url: str | None, sample_rate: float | None) -> None:
        period = 1.0 if self.live else 5.0
        if self.live:
            self.out.write("\x1b[2J")
        while True:
            await asyncio.sleep(period)
            view = await self._view(endpoint, metrics_url, sample_rate, time.monotonic() - self._started)
            if self.live:
                columns, rows = shutil.get_terminal_size((100, 50))
                width = max(60, min(100, columns))
                lines = render(view, color=self.color, width=width).split("\n")
                if len(lines) > rows - 1:  # redrawing more than a screen would scroll and flicker
                    lines = render(view, color=self.color, width=width, compact=True).split("\n")[: rows - 1]
                self.out.write("\x1b[H" + "".join(line + "\x1b[K\n" for line in lines) + "\x1b[J")
            else:
                self.out.write(progress_line(view) + "\n")
            self.out.flush()

    async def _view(
        self, endpoint: str, metrics_url: str | None, sample_rate: float | None, elapsed: float,
        *, final: bool = False, early: bool = False,
    ) -> DemoView:
        assert self.tracker is not None
        counts = await self._counts(metrics_url)
        thresholds = self.tracker.thresholds
        notes: tuple[str, ...] = ()
        if self._errors:
            notes = (f"{self._errors} demo requests raised inside the app (see the log).",)
        corpus = load_corpus()
        return DemoView(
            mode=self.o.agent_mode, elapsed_s=elapsed, duration_s=self.o.duration_s, rate=self.o.rate,
            seed=self.o.seed, company=corpus.company, document_count=len(corpus.documents), otlp_endpoint=endpoint,
            tracker=self.tracker.snapshot(),
            thresholds={name: thresholds[name] for name in quality.online_names()},
            slow_threshold_s=self.o.slow_threshold_s, sample_rate=sample_rate, metrics_url=metrics_url,
            counts=counts, final=final, stopped_early=early, notes=notes, linger_s=self.o.linger_s,
        )

    async def _counts(self, metrics_url: str | None) -> AgentCounts | None:
        from .counts import counts_from_registry, counts_from_text

        if self.agent is not None:
            return counts_from_registry(self.agent.metrics.registry, SERVICE_NAME)
        if not metrics_url:
            return None
        import httpx

        try:
            async with httpx.AsyncClient(timeout=2.0) as client:
                response = await client.get(metrics_url.rstrip("/") + "/metrics")
                response.raise_for_status()
            return counts_from_text(response.text, SERVICE_NAME)
        except (httpx.HTTPError, ValueError) as exc:
            log.debug("cannot read %s/metrics: %s", metrics_url, exc)
            return None

    def _write_json(self, view: DemoView) -> None:
        data = {
            "mode": view.mode, "elapsed_s": round(view.elapsed_s, 3), "stopped_early": view.stopped_early,
            "seed": view.seed, "rate": view.rate, "sample_rate": view.sample_rate,
            "thresholds": dict(view.thresholds), "slow_threshold_s": view.slow_threshold_s,
            "agent": view.counts.as_dict() if view.counts is not None else None,
            "kinds": {k.value: s.as_dict() for k, s in view.tracker.kinds.items()},
            "contradiction_changes": dict(view.tracker.contradiction_changes),
            "contradiction_caught": {c: {"caught": v[0], "scored": v[1]}
                                     for c, v in view.tracker.contradiction_caught.items()},
            "unmatched_scored": view.tracker.unmatched_scored,
            "app_errors": self._errors,
        }
        with open(self.o.summary_json, "w", encoding="utf-8") as fh:  # type: ignore[arg-type]
            json.dump(data, fh, indent=2)
            fh.write("\n")

    def _say(self, text: str, *, err: bool = False, end: str = "\n") -> None:
        stream = sys.stderr if err else self.out
        stream.write(text + end)
        stream.flush()


def run_demo(options: DemoOptions, out: TextIO | None = None) -> int:
    return asyncio.run(DemoRunner(options, out).run())
