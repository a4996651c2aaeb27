"""``@ragmon.pipeline``, ``@ragmon.retriever``, ``@ragmon.generator``.

Usable bare (``@ragmon.retriever``) or with arguments
(``@ragmon.retriever(name="search", question_arg="q", model="gpt-4o", tags=["prod"])``), on
``def``, ``async def``, methods (also under ``staticmethod``/``classmethod``), generator functions
and async generator functions. The span covers the work: it ends after the return, the await, or
the last streamed item. What each stage records:

* all: ``input.value`` = the question: the argument named by ``question_arg`` (a name or a
  position), else a ``query``/``question`` parameter, else the first ``str`` argument;
  ``question_arg=False`` records none.
* retriever: the returned (or yielded) documents, see :mod:`ragmon.sdk.documents`.
* generator / pipeline: ``output.value`` = the returned answer, or the joined streamed chunks.

On an exception the span gets status ERROR, ``error.type`` and an exception event, and the very
same exception object propagates to the caller. The wrapper never raises anything of its own.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, overload

from .. import semconv as sc
from . import _runtime
from .spans import RagSpan, start, static_attributes

F = TypeVar("F", bound=Callable[..., Any])
QuestionArg = str | int | bool | None
_DEFAULT_QUESTION_NAMES = ("query", "question")

QuestionGetter = Callable[[tuple[Any, ...], dict[str, Any]], Any]


def _first_str(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    for value in args:
        if isinstance(value, str):
            return value
    for value in kwargs.values():
        if isinstance(value, str):
            return value
    return None


def _by_name(name: str, index: int | None) -> QuestionGetter:
    def get(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if name in kwargs:
            return kwargs[name]
        if index is not None and index < len(args):
            return args[index]
        return None

    return get


def _by_index(index: int) -> QuestionGetter:
    def get(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return args[index] if -len(args) <= index < len(args) else None

    return get


def question_getter(fn: Callable[..., Any], question_arg: QuestionArg) -> QuestionGetter | None:
    """Decide once, at decoration time, where each call's question comes from."""
    if question_arg is False:
        return None
    if isinstance(question_arg, int) and not isinstance(question_arg, bool):
        return _by_index(question_arg)
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params
                  if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    names = (question_arg,) if isinstance(question_arg, str) else _DEFAULT_QUESTION_NAMES
    for name in names:
        if name in positional:
            return _by_name(name, positional.index(name))
        if any(p.name == name for p in params) or isinstance(question_arg, str):
            return _by_name(name, None)  # keyword-only, or caught by **kwargs
    return _first_str


class _Spec:
    """Everything about a decorated function that does not change between calls."""

    __slots__ = ("attrs", "name", "question", "stage")

    def __init__(self, stage: str, name: str, attrs: dict[str, Any], question: QuestionGetter | None) -> None:
        self.stage = stage
        self.name = name
        self.attrs = attrs
        self.question = question

    def begin(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> RagSpan | None:
        rag = start(self.stage, self.name, self.attrs)
        if rag is not None and self.question is not None:
            try:
                rag.set_question(self.question(args, kwargs))
            except Exception as exc:
                _runtime.internal_error("question_capture", exc)
        return rag


def _wrap(fn: Any, stage: str, name: str | None, question_arg: QuestionArg, attrs: dict[str, Any]) -> Any:
    if isinstance(fn, staticmethod | classmethod):
        return type(fn)(_wrap(fn.__func__, stage, name, question_arg, attrs))
    if not callable(fn):
        raise TypeError(f"ragmon.{stage} decorates a function, got {type(fn).__name__}")
    span_name = name or str(getattr(fn, "__name__", stage))
    spec = _Spec(stage, span_name, static_attributes(stage, attrs),
                 question_getter(fn, question_arg))

    wrapper: Callable[..., Any]
    if inspect.isasyncgenfunction(fn):
        wrapper = _async_gen_wrapper(fn, spec)
    elif inspect.isgeneratorfunction(fn):
        wrapper = _gen_wrapper(fn, spec)
    elif inspect.iscoroutinefunction(fn):
        wrapper = _async_wrapper(fn, spec)
    else:
        wrapper = _sync_wrapper(fn, spec)
    return functools.wraps(fn)(wrapper)


def _sync_wrapper(fn: Callable[..., Any], spec: _Spec) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        rag = spec.begin(args, kwargs)
        if rag is None:
            return fn(*args, **kwargs)
        rag.activate()
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            rag.finish(exc)
            raise
        rag.finish(result=result, has_result=True)
        return result

    return wrapper


def _async_wrapper(fn: Callable[..., Any], spec: _Spec) -> Callable[..., Any]:
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        rag = spec.begin(args, kwargs)
        if rag is None:
            return await fn(*args, **kwargs)
        rag.activate()  # the coroutine keeps one context across its awaits, so this is safe
        try:
            result = await fn(*args, **kwargs)
        except BaseException as exc:
            rag.finish(exc)
            raise
        rag.finish(result=result, has_result=True)
        return result

    return wrapper


def _gen_wrapper(fn: Callable[..., Any], spec: _Spec) -> Callable[..., Any]:
    # The span is current only while the wrapped generator runs (each step), never while the
    # consumer runs between steps, so the consumer's own spans do not nest under it.
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        rag = spec.begin(args, kwargs)
        if rag is None:
            return (yield from fn(*args, **kwargs))
        inner = fn(*args, **kwargs)
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            rag.activate()
            try:
                item = inner.send(sent) if thrown is None else inner.throw(thrown)
            except StopIteration as stop:
                rag.finish(streamed=True)
                return stop.value
            except BaseException as exc:
                rag.finish(exc, streamed=True)
                raise
            finally:
                rag.deactivate()
            thrown = None
            rag.add_chunk(item)
            try:
                sent = yield item
            except GeneratorExit:  # the consumer stopped early: close the inner generator too
                try:
                    inner.close()
                finally:
                    rag.finish(streamed=True)
                raise
            except BaseException as exc:  # generator.throw() from the consumer: pass it on
                thrown = exc

    return wrapper


def _async_gen_wrapper(fn: Callable[..., Any], spec: _Spec) -> Callable[..., Any]:
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        rag = spec.begin(args, kwargs)
        if rag is None:
            async for item in fn(*args, **kwargs):
                yield item
            return
        inner = fn(*args, **kwargs)
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            rag.activate()
            try:
                item = await (inner.asend(sent) if thrown is None else inner.athrow(thrown))
            except StopAsyncIteration:
                rag.finish(streamed=True)
                return
            except BaseException as exc:
                rag.finish(exc, streamed=True)
                raise
            finally:
                rag.deactivate()
            thrown = None
            rag.add_chunk(item)
            try:
                sent = yield item
            except GeneratorExit:
                try:
                    await inner.aclose()
                finally:
                    rag.finish(streamed=True)
                raise
            except BaseException as exc:
                thrown = exc

    return wrapper


@overload
def pipeline(fn: F, /) -> F: ...
@overload
def pipeline(fn: None = None, /, *, name: str | None = None, question_arg: QuestionArg = None,
             **attrs: Any) -> Callable[[F], F]: ...
def pipeline(fn: Any = None, /, *, name: str | None = None, question_arg: QuestionArg = None,
             **attrs: Any) -> Any:
    """Trace a whole RAG request (OpenInference CHAIN).

    Its name (``name=`` or the function name) is ``ragmon.pipeline`` on every span below it.
    """
    return _decorate(fn, sc.STAGE_PIPELINE, name, question_arg, attrs)


@overload
def retriever(fn: F, /) -> F: ...
@overload
def retriever(fn: None = None, /, *, name: str | None = None, question_arg: QuestionArg = None,
              **attrs: Any) -> Callable[[F], F]: ...
def retriever(fn: Any = None, /, *, name: str | None = None, question_arg: QuestionArg = None,
              **attrs: Any) -> Any:
    """Trace a retrieval step (OpenInference RETRIEVER); records the returned documents."""
    return _decorate(fn, sc.STAGE_RETRIEVER, name, question_arg, attrs)


@overload
def generator(fn: F, /) -> F: ...
@overload
def generator(fn: None = None, /, *, name: str | None = None, question_arg: QuestionArg = None,
              **attrs: Any) -> Callable[[F], F]: ...
def generator(fn: Any = None, /, *, name: str | None = None, question_arg: QuestionArg = None,
              **attrs: Any) -> Any:
    """Trace answer generation (OpenInference LLM); records the answer, returned or streamed.

    User attributes: ``model`` (``llm.model_name``), ``prompt_version``
    (``llm.prompt_template.version``), ``session_id``, ``user_id``, ``tags``, ``metadata``.
    """
    return _decorate(fn, sc.STAGE_GENERATOR, name, question_arg, attrs)


def _decorate(fn: Any, stage: str, name: str | None, question_arg: QuestionArg, attrs: dict[str, Any]) -> Any:
    if fn is None:
        return lambda f: _wrap(f, stage, name, question_arg, attrs)
    return _wrap(fn, stage, name, question_arg, attrs)
