"""The judge pool: a queue of traces to judge, ``judge_concurrency`` workers and the timeout around
each judgement. It turns whatever the judge does into one ``JudgeOutcome`` (scores, a skip reason
or a failure reason) and hands it to ``settle``; it counts nothing itself. Its length is bounded by
the caller (the router queues only while the ledger's in-flight count is below the backlog).

On stop the workers are cancelled until they are gone (``close``); a worker that ignores every
round is abandoned, and the caller accounts for what it held (``settle`` must check that a trace it
is handed is still in flight).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from .. import semconv as sc
from .._log import LogOnce
from ..errors import JudgeBudgetExceeded, JudgeError
from ..ingest.closed_trace import ClosedTrace
from ..scoring.judge import Judge
from ..types import Scores

__all__ = ["CANCEL_RETRY_S", "CANCEL_ROUNDS", "JudgeOutcome", "JudgePool", "JudgePoolSettings"]

log = logging.getLogger("ragmon.agent")

CANCEL_RETRY_S: Final = 0.1  # close(): cancel again after this long (a cancellation can be swallowed)
CANCEL_ROUNDS: Final = 50  # ... and give up on a worker that ignores this many (its trace is accounted anyway)


@dataclass(frozen=True, slots=True)
class JudgePoolSettings:
    """The judge pool's rows of the settings table (``AgentConfig.section(JudgePoolSettings)``)."""

    judge_concurrency: int
    judge_timeout_s: float
    judge_max_retries: int


@dataclass(frozen=True, slots=True)
class JudgeOutcome:
    """How one judgement ended: ``scores``, or a ``skip`` reason (over budget), or a ``failed``
    reason (a JudgeError's, timeout, internal_error); ``elapsed_s`` of the judge's call."""

    scores: Scores | None = None
    skip: str | None = None
    failed: str | None = None
    elapsed_s: float = 0.0


Settle = Callable[[ClosedTrace, JudgeOutcome], None]


class JudgePool:
    """``start(judge)``, ``put(closed)``, ``await close()``; ``settle(closed, outcome)`` is told how
    each judgement ended; ``on_error(closed)`` when settling it raised (a bug: failed{internal_error})."""

    def __init__(self, settings: JudgePoolSettings, settle: Settle, on_error: Callable[[ClosedTrace], None],
                 log_once: LogOnce) -> None:
        self._concurrency = settings.judge_concurrency
        # An outer bound in case a judge ignores its own timeouts; none for a judge that bounds
        # itself (the LLM judge: a 429 with Retry-After may rightly wait longer than this).
        self.outer_timeout_s = settings.judge_timeout_s * (settings.judge_max_retries + 2)
        self._settle = settle
        self._on_error = on_error
        self._log_once = log_once
        self._queue: asyncio.Queue[ClosedTrace] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._judge: Judge | None = None
        self.closed = False  # after close(): nothing more is judged

    @property
    def judge(self) -> Judge | None:
        return self._judge

    @property
    def judge_name(self) -> str:
        return self._judge.name if self._judge is not None else sc.UNKNOWN_LABEL

    def start(self, judge: Judge) -> None:
        """Start the workers (inside the running loop)."""
        self._judge = judge
        for i in range(self._concurrency):
            self._tasks.append(asyncio.create_task(self._worker(), name=f"ragmon-judge-{i}"))

    def put(self, closed: ClosedTrace) -> None:
        self._queue.put_nowait(closed)

    def idle(self) -> bool:
        """Nothing queued (a worker may still be judging)."""
        return self._queue.empty()

    async def close(self) -> None:
        """Cancel the workers until they are gone. One cancel() is not always enough: on Python 3.11
        ``asyncio.wait_for`` swallows a cancellation that arrives as the awaited coroutine finishes,
        and a judge may swallow one itself; the worker then goes back to the queue and would keep
        close() waiting forever. A worker that ignores every round is abandoned (logged); whatever
        it reports later is ignored by ``settle`` (its trace is no longer in flight)."""
        self.closed = True
        pending = set(self._tasks)
        for _ in range(CANCEL_ROUNDS):
            if not pending:
                break
            for task in pending:
                task.cancel()
            _done, pending = await asyncio.wait(pending, timeout=CANCEL_RETRY_S)
        if pending:
            log.error("%d judge worker(s) ignored cancellation; abandoning them", len(pending))
        self._tasks.clear()

    async def _worker(self) -> None:
        queue = self._queue
        while True:
            closed = await queue.get()
            try:
                self._settle(closed, await self.judge_one(closed))
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001  # a worker must survive any bug: the trace is accounted by on_error
                self._log_once.warning("worker", "internal error in judge worker", exc_info=True)
                self._on_error(closed)
            finally:
                queue.task_done()

    async def judge_one(self, closed: ClosedTrace) -> JudgeOutcome:
        """Judge one trace within the outer timeout; every way it can end is an outcome."""
        judge = self._judge
        assert judge is not None, "JudgePool.start() first"
        started = time.perf_counter()
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow the worker's cancellation
        try:
            async with asyncio.timeout(None if judge.bounds_own_duration else self.outer_timeout_s):
                scores = await judge.score(closed.trace)
        except JudgeBudgetExceeded:
            return JudgeOutcome(skip=sc.SKIP_BUDGET)
        except JudgeError as exc:
            self._log_once.warning(f"judge:{exc.reason}", "judge failed (%s): %s", exc.reason, exc)
            return JudgeOutcome(failed=exc.reason)
        except TimeoutError:
            self._log_once.warning("judge:timeout", "judge exceeded %.0fs", self.outer_timeout_s)
            return JudgeOutcome(failed=sc.FAIL_TIMEOUT)
        except Exception as exc:  # noqa: BLE001  # any judge bug becomes failed{reason="internal_error"}
            self._log_once.warning(f"judge:{type(exc).__name__}", "judge raised %r", exc, exc_info=True)
            return JudgeOutcome(failed=sc.FAIL_INTERNAL)
        return JudgeOutcome(scores=scores, elapsed_s=time.perf_counter() - started)
