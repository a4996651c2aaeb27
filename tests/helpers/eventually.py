"""Wait for an observable condition instead of sleeping for a guessed time.

A test that sleeps "long enough" for a timer to fire (a commit interval, a gauge refresh tick, a
rule evaluation) races that timer: on a loaded machine it fails, on an idle one it wastes time.
``eventually`` polls the condition itself, returns as soon as it holds and fails, after a bounded
time, with a message naming what was awaited and the last value (or exception) seen.

``check`` returns something truthy when done; that value is returned, so a check can hand back
what it observed (a scrape, a record) for the test to assert on. An exception raised by ``check``
counts as "not yet" and is reported if time runs out. A sleep stays legitimate only where a test
asserts that something does *not* happen within a window, or where it paces traffic.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["eventually", "eventually_sync"]

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_INTERVAL_S = 0.05
_MAX_REPR = 300


async def eventually(check: Callable[[], T | Awaitable[T]], timeout_s: float = DEFAULT_TIMEOUT_S,
                     what: str = "condition", interval_s: float = DEFAULT_INTERVAL_S) -> T:
    """Poll ``check`` (sync or async) until it returns something truthy, and return that."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        timed_out = loop.time() >= deadline
        try:
            result = check()
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            if timed_out:
                raise _timeout(what, timeout_s, exc) from exc
        else:
            if result:
                return result
            if timed_out:
                raise _timeout(what, timeout_s, result)
        await asyncio.sleep(interval_s)


def eventually_sync(check: Callable[[], T], timeout_s: float = DEFAULT_TIMEOUT_S, what: str = "condition",
                    interval_s: float = DEFAULT_INTERVAL_S) -> T:
    """The same for synchronous tests (or code running in a worker thread)."""
    deadline = time.monotonic() + timeout_s
    while True:
        timed_out = time.monotonic() >= deadline
        try:
            result = check()
        except Exception as exc:
            if timed_out:
                raise _timeout(what, timeout_s, exc) from exc
        else:
            if result:
                return result
            if timed_out:
                raise _timeout(what, timeout_s, result)
        time.sleep(interval_s)


def _timeout(what: str, timeout_s: float, last: object) -> AssertionError:
    if isinstance(last, BaseException):
        seen = f"last check raised {type(last).__name__}: {last}"
    else:
        seen = f"last value: {last!r}"
    if len(seen) > _MAX_REPR:
        seen = seen[:_MAX_REPR] + "..."
    return AssertionError(f"timed out after {timeout_s:g} s waiting for {what} ({seen})")
