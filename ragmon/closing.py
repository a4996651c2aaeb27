"""Closing a network client on the way out: the one way ragmon's stop paths shut aiokafka's consumers,
producers and admin clients.

A stop must finish whatever the client raises, and must not turn into a crash: aiokafka 0.14's
``AIOKafkaConsumer.stop()`` raises ``CancelledError`` when a fetch was retrying at the time (its
``Fetcher.close()`` awaits the fetch tasks it has just cancelled; aio-libs/aiokafka#647, #983), which
is exactly the case of an agent stopped while the broker is down. The client's connections are then
still open: ``connections`` closes them, or their sockets leak. A cancellation of the *stopping*
task itself is never swallowed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("ragmon.closing")


async def close_quietly(close: Callable[[], Awaitable[object]], timeout_s: float, what: str,
                        connections: Callable[[], Awaitable[object]] | None = None) -> bool:
    """Await ``close()`` for at most ``timeout_s``; True when it finished cleanly.

    Its errors (``CancelledError`` from the client's own tasks included) are logged at DEBUG and
    swallowed; then ``connections()``, when given, closes what the failed close left open.
    """
    if await _bounded(close, timeout_s, what):
        return True
    if connections is not None:
        await _bounded(connections, timeout_s, f"{what}'s connections")
    return False


async def _bounded(close: Callable[[], Awaitable[object]], timeout_s: float, what: str) -> bool:
    task = asyncio.current_task()
    # counted, not just tested: a stop that runs because its task was cancelled (an ``except
    # BaseException:`` clean-up) still tells the client's own CancelledError from a new cancel()
    requests = task.cancelling() if task is not None else 0
    try:
        await asyncio.wait_for(close(), timeout=timeout_s)
    except asyncio.CancelledError:
        if task is not None and task.cancelling() > requests:  # we were cancelled meanwhile: that goes on
            raise
        log.debug("closing %s: it raised CancelledError from its own tasks", what)
        return False
    except Exception as exc:  # noqa: BLE001  # on the way out: nothing left to do about it
        log.debug("closing %s failed: %r", what, exc)
        return False
    return True
