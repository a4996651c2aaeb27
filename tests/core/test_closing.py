"""close_quietly: a stop finishes whatever the client's close raises (aiokafka's CancelledError from
its own cancelled tasks included), closes what a failed close left open, and never swallows a
cancellation of the stopping task itself. The real-broker case is in tests/kafka."""

from __future__ import annotations

import asyncio

import pytest

from ragmon.closing import close_quietly


class Client:
    """Shaped like aiokafka's consumer: ``stop()`` cancels a background task of its own and awaits it
    without suppressing the cancellation (aiokafka 0.14's Fetcher.close), so the connections it
    would close next stay open."""

    def __init__(self, raise_on_stop: BaseException | None = None) -> None:
        self.raise_on_stop = raise_on_stop
        self.connections_open = True
        self._fetch = asyncio.create_task(asyncio.sleep(3600))

    async def stop(self) -> None:
        self._fetch.cancel()
        await self._fetch  # raises CancelledError: the fetch task was cancelled
        self.connections_open = False

    async def stop_raising(self) -> None:
        assert self.raise_on_stop is not None
        raise self.raise_on_stop

    async def stop_hanging(self) -> None:
        await asyncio.sleep(3600)

    async def close_connections(self) -> None:
        self.connections_open = False


async def test_cancelled_error_from_the_clients_own_task_is_survived_and_its_connections_closed() -> None:
    client = Client()
    assert await close_quietly(client.stop, 5, "client", connections=client.close_connections) is False
    assert not client.connections_open
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_clean_close_needs_no_fallback() -> None:
    client = Client()
    client._fetch.cancel()

    async def stop_cleanly() -> None:
        client.connections_open = False

    async def must_not_run() -> None:
        raise AssertionError("connections() runs only after a failed close")

    assert await close_quietly(stop_cleanly, 5, "client", connections=must_not_run) is True


async def test_errors_and_hangs_are_bounded_and_swallowed() -> None:
    client = Client(raise_on_stop=ConnectionError("broker gone"))
    assert await close_quietly(client.stop_raising, 5, "client") is False
    assert await close_quietly(client.stop_hanging, 0.05, "client", connections=client.close_connections) is False
    assert not client.connections_open
    client._fetch.cancel()


async def test_a_cancellation_of_the_stopping_task_goes_on() -> None:
    client = Client()
    started = asyncio.Event()

    async def slow_stop() -> None:
        started.set()
        await asyncio.sleep(3600)

    stopping = asyncio.create_task(close_quietly(slow_stop, 60, "client"))
    await started.wait()
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    client._fetch.cancel()


async def test_a_clean_up_running_after_a_cancellation_still_closes_the_connections() -> None:
    """``except BaseException: await stop(client); raise``: the task is being cancelled already, and
    the client's own CancelledError must still lead to its connections being closed."""
    client = Client()
    closed_after_cancel = asyncio.Event()

    async def connect_then_clean_up() -> None:
        try:
            await asyncio.sleep(3600)  # a connect, cancelled by stop()
        except BaseException:
            await close_quietly(client.stop, 5, "client", connections=client.close_connections)
            closed_after_cancel.set()
            raise

    connecting = asyncio.create_task(connect_then_clean_up())
    await asyncio.sleep(0)
    connecting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await connecting
    assert closed_after_cancel.is_set() and not client.connections_open
