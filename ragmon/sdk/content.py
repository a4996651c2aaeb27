"""Text extraction from the values RAG code passes around, and the field policy
(redaction hook first, then the size cap with a visible marker).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .. import semconv as sc
from . import _runtime

QUESTION_ATTRS = ("query_str", "query", "question", "text", "content")  # LlamaIndex QueryBundle, ...
ANSWER_KEYS = ("answer", "output", "result", "response", "text", "content")
CHUNK_KEYS = ("content", "text", "delta", "token")


def question_text(value: Any) -> str | None:
    """A question passed as ``str`` or as an object/dict holding it (e.g. LlamaIndex QueryBundle)."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, int | float | bool):
        return None
    if isinstance(value, Mapping):
        return _str_from(value.get(k) for k in QUESTION_ATTRS)
    return _str_from(getattr(value, k, None) for k in QUESTION_ATTRS)


def answer_text(value: Any) -> str | None:
    """The answer a generator or pipeline returned: a ``str``, a dict/object holding one
    (LlamaIndex ``Response.response``, LangChain ``AIMessage.content``), or an OpenAI-style
    chat completion (``choices[0].message.content``)."""
    if isinstance(value, str):
        return value
    if value is None:
        return None
    if isinstance(value, bool | int | float):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, Mapping):
        found = _str_from(value.get(k) for k in ANSWER_KEYS)
        if found is not None:
            return found
        return _choice_text(value.get("choices"), "message")
    found = _str_from(getattr(value, k, None) for k in ANSWER_KEYS)
    if found is not None:
        return found
    return _choice_text(getattr(value, "choices", None), "message")


def chunk_text(chunk: Any) -> str | None:
    """Text of one streamed chunk: ``str``, ``{"content": ...}``, LangChain ``AIMessageChunk``,
    or an OpenAI ``ChatCompletionChunk`` (``choices[0].delta.content``)."""
    if isinstance(chunk, str):
        return chunk
    if chunk is None:
        return None
    if isinstance(chunk, bytes | bytearray):
        return bytes(chunk).decode("utf-8", "replace")
    if isinstance(chunk, Mapping):
        found = _str_from(chunk.get(k) for k in CHUNK_KEYS)
        return found if found is not None else _choice_text(chunk.get("choices"), "delta")
    found = _str_from(getattr(chunk, k, None) for k in CHUNK_KEYS)
    return found if found is not None else _choice_text(getattr(chunk, "choices", None), "delta")


def _choice_text(choices: Any, field: str) -> str | None:
    if not isinstance(choices, list | tuple) or not choices:
        return None
    first = choices[0]
    holder = first.get(field) if isinstance(first, Mapping) else getattr(first, field, None)
    content = holder.get("content") if isinstance(holder, Mapping) else getattr(holder, "content", None)
    return content if isinstance(content, str) else None


def _str_from(values: Any) -> str | None:
    for value in values:
        if isinstance(value, str):
            return value
    return None


def apply_policy(field: str, text: str, redact: _runtime.RedactHook | None, cap: int) -> tuple[str | None, bool, bool]:
    """(text to attach or None, redacted?, truncated?) for one text field.

    The redaction hook sees the full text first, so a pattern is never split by the cap.
    A hook that raises, or returns something other than ``str``/``None``, drops the text:
    with PII at stake we fail closed.
    """
    redacted = False
    if redact is not None:
        try:
            out = redact(field, text)
        except Exception as exc:
            _runtime.internal_error("redact_hook", exc, "text dropped")
            return None, True, False
        if out is None:
            return None, True, False
        if not isinstance(out, str):
            _runtime.internal_error("redact_hook", None, f"returned {type(out).__name__}, text dropped")
            return None, True, False
        redacted = out != text
        text = out
    if len(text) > cap:
        keep = max(0, cap - len(sc.TRUNCATION_MARKER))
        return text[:keep] + sc.TRUNCATION_MARKER, redacted, True
    return text, redacted, False


def to_json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
