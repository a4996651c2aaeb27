"""``ragmon eval EVALSET --app package.module:function``: call the user's RAG entry point with
each golden question, in-process, and observe it through its own spans.

The entry point is called as ``fn(question)`` with the question string:

* ``def``: on a thread of its own (see below); ``async def``: on the event loop. A function that
  returns an awaitable, a generator or an async generator (a streamed answer) is awaited /
  drained, so its pipeline span covers the whole answer.
* at most ``concurrency`` calls run at once; each call gets ``timeout_s`` seconds.
* its spans are captured in memory and built into a ``RagTrace`` by the agent's own decoder and
  extraction (see :mod:`.capture`), so offline numbers mean what online numbers mean.

Every row is accounted for, in row order: evaluated (``Observation.trace`` set), or with a
problem — ``app_error`` (it raised: the exception's type and message), ``app_timeout`` (it ran
past ``timeout_s``) or ``no_trace`` (it returned but produced no RAG spans: not decorated, or
ragmon's spans went elsewhere).

Timeouts. An ``async def`` call past its time is cancelled. A ``def`` call cannot be killed in
Python; it runs on a daemon thread, is accounted ``app_timeout`` and abandoned: the run goes on,
its concurrency slot is released, spans it ends later are ignored, and nothing waits for it at
the end (``asyncio.to_thread`` is not used for that reason: the loop's default executor is joined
when ``asyncio.run`` returns, which would wait forever on a hung call). An ``async def`` that
blocks the event loop (``time.sleep`` inside it) cannot be timed out at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import inspect
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry import context as otel_context

from .capture import CaptureSession, SpanCapture, call_context, has_rag_data, to_rag_trace, with_question
from .doc_ids import map_doc_ids
from .goldenset import EvalInputError
from .responses import golden_rows
from .types import (
    PROBLEM_APP_ERROR,
    PROBLEM_APP_TIMEOUT,
    PROBLEM_NO_TRACE,
    GoldenRow,
    GoldenSet,
    Observation,
    RowProblem,
)

__all__ = ["DEFAULT_CONCURRENCY", "DEFAULT_TIMEOUT_S", "SOURCE_APP", "load_app", "run_app"]

SOURCE_APP = "app"
DEFAULT_CONCURRENCY = 4
DEFAULT_TIMEOUT_S = 60.0
_MAX_MESSAGE_CHARS = 300

Progress = Callable[[int, int], None]


def load_app(spec: str) -> Callable[..., Any]:
    """Import ``package.module:attr`` (``attr`` may be dotted: ``module:App.answer``).

    The current directory is put first on ``sys.path`` (as uvicorn does) so a project's own
    modules import. Raises ``EvalInputError`` with the reason when it cannot be loaded.
    """
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name.strip() or not attr_path.strip():
        raise EvalInputError(f"--app {spec!r}: expected 'package.module:function'")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name.strip())
    except Exception as exc:  # an app's import can fail any way at all
        raise EvalInputError(f"--app {spec!r}: cannot import {module_name!r}: "
                             f"{type(exc).__name__}: {exc}") from exc
    target: Any = module
    for part in attr_path.strip().split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise EvalInputError(f"--app {spec!r}: {module_name!r} has no attribute {attr_path!r}") from exc
    if not callable(target):
        raise EvalInputError(f"--app {spec!r}: {attr_path!r} is a {type(target).__name__}, not a function")
    entry: Callable[..., Any] = target
    return entry


async def run_app(
    rows: GoldenSet | Sequence[GoldenRow],
    app: str | Callable[..., Any],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    doc_id_field: str | None = None,
    progress: Progress | None = None,
) -> list[Observation]:
    """Call ``app`` with every row's question; one Observation per row, in row order.

    ``app`` is a ``module:function`` spec (see :func:`load_app`) or an already imported callable.
    ``progress(done, total)`` is called after each row (exceptions from it propagate).
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    rows = golden_rows(rows)
    fn = load_app(app) if isinstance(app, str) else app
    if not callable(fn):
        raise EvalInputError(f"app must be callable, got {type(fn).__name__}")
    total = len(rows)
    done = 0
    semaphore = asyncio.Semaphore(concurrency)

    with CaptureSession() as capture:

        async def one(row: GoldenRow) -> Observation:
            nonlocal done
            async with semaphore:
                observation = await _observe(fn, row, capture, timeout_s, doc_id_field)
            done += 1
            if progress is not None:
                progress(done, total)
            return observation

        return list(await asyncio.gather(*(one(row) for row in rows)))


async def _observe(fn: Callable[..., Any], row: GoldenRow, capture: SpanCapture, timeout_s: float,
                   doc_id_field: str | None) -> Observation:
    trace_id, ctx = call_context()
    capture.expect(trace_id)
    try:
        output = await _call_with_timeout(fn, row.question, ctx, timeout_s)
    except _CallTimedOut:
        capture.take(trace_id)
        return _failed(row, PROBLEM_APP_TIMEOUT, f"no answer within {timeout_s:g} s")
    except _AppRaised as raised:
        capture.take(trace_id)
        exc = raised.original
        return _failed(row, PROBLEM_APP_ERROR, f"{type(exc).__name__}: {_clip(str(exc))}")
    except BaseException:
        capture.take(trace_id)
        raise
    trace = to_rag_trace(capture.take(trace_id))
    text = output if isinstance(output, str) else None
    if trace is None or not has_rag_data(trace):
        found = "no spans" if trace is None else f"{trace.span_count} span(s) without RAG data"
        return _failed(row, PROBLEM_NO_TRACE, f"the app returned but produced {found}: is the entry point "
                       "decorated with @ragmon.pipeline (and its stages with @ragmon.retriever/@ragmon.generator)?",
                       output=text)
    trace = with_question(trace, row.question)
    mapped = map_doc_ids(trace, doc_id_field)
    return Observation(row.id, trace, retrieved_ids=mapped.ids, app_output=text, unmapped_doc_ids=mapped.unmapped)


def _failed(row: GoldenRow, reason: str, message: str, output: str | None = None) -> Observation:
    problem = RowProblem(reason, message, line=row.line or None, row_id=row.id, source=SOURCE_APP)
    return Observation(row.id, None, problem=problem, app_output=output)


# --- calling the app ------------------------------------------------------------------------------------
class _CallTimedOut(Exception):
    """The call ran past its timeout (never the app's own ``TimeoutError``)."""


class _AppRaised(Exception):
    """Whatever the app raised (``SystemExit``, ``CancelledError``... included), carried out."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(repr(original))
        self.original = original


async def _call_with_timeout(fn: Callable[..., Any], question: str, ctx: otel_context.Context,
                             timeout_s: float) -> Any:
    """Run one call in ``ctx``: its result, ``_AppRaised`` or ``_CallTimedOut`` (the call is then
    cancelled or, when on a thread, abandoned)."""
    task = asyncio.ensure_future(_call(fn, question, ctx))
    try:
        finished, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:  # the run itself is cancelled: take the call along
        task.cancel()
        raise
    if not finished:
        task.cancel()  # not awaited: an app that swallows cancellation must not hold the run
        task.add_done_callback(_consume_result)
        raise _CallTimedOut
    if task.cancelled():  # the app cancelled itself
        raise _AppRaised(asyncio.CancelledError())
    exc = task.exception()
    if exc is not None:
        raise exc if isinstance(exc, _AppRaised) else _AppRaised(exc)
    return task.result()


async def _call(fn: Callable[..., Any], question: str, ctx: otel_context.Context) -> Any:
    token = otel_context.attach(ctx)  # this task's own context copy: concurrent calls don't mix
    try:
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            result = fn(question)
        else:
            result = await _in_thread(fn, question)
        if inspect.isawaitable(result):
            result = await result
        if inspect.isasyncgen(result):
            result = "".join([str(chunk) async for chunk in result])
        return result
    except _AppRaised:
        raise
    except (Exception, asyncio.CancelledError) as exc:
        raise _AppRaised(exc) from exc
    finally:
        otel_context.detach(token)


def _in_thread(fn: Callable[..., Any], question: str) -> asyncio.Future[Any]:
    """``fn(question)`` on a daemon thread in a copy of the current context; a returned
    generator is drained there too."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def call() -> Any:
        result = fn(question)
        if inspect.isgenerator(result):
            return "".join(str(chunk) for chunk in result)
        return result

    def target() -> None:
        try:
            outcome: tuple[bool, Any] = (True, context.run(call))
        except BaseException as exc:  # noqa: BLE001  # SystemExit too: on this thread it would only end the thread
            outcome = (False, _AppRaised(exc))
        with contextlib.suppress(RuntimeError):  # loop closed: the run is over, nobody waits any more
            loop.call_soon_threadsafe(_settle, future, outcome)

    threading.Thread(target=target, name="ragmon-eval-app", daemon=True).start()
    return future


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():  # timed out and abandoned
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def _consume_result(task: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned call's outcome so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE_CHARS else text[: _MAX_MESSAGE_CHARS - 1] + "…"
