"""The question and the answer as human text, from span inputs/outputs that may be JSON-wrapped
(``{"inputs": {"question": ...}}``, chat completion responses, LangChain ``generations``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ... import semconv as sc
from ...types import SpanRecord
from ._values import MAX_DEPTH, MAX_JSON_CHARS, unwrap_serialized

QUESTION_KEYS = ("question", "query", "query_str", "user_input", "input", "inputs", "prompt", "q",
                 "text", "message", "messages", "args")
ANSWER_KEYS = ("answer", "output", "outputs", "result", "response", "output_text", "generations",
               "choices", "text", "content", "message", "generation")


def span_input(span: SpanRecord) -> str | None:
    attrs = span.attributes
    return find_text(attrs.get(sc.INPUT_VALUE), QUESTION_KEYS) or find_text(
        attrs.get(sc.TRACELOOP_ENTITY_INPUT), QUESTION_KEYS)


def span_output(span: SpanRecord) -> str | None:
    attrs = span.attributes
    return find_text(attrs.get(sc.OUTPUT_VALUE), ANSWER_KEYS) or find_text(
        attrs.get(sc.TRACELOOP_ENTITY_OUTPUT), ANSWER_KEYS)


def first_text(values: Iterable[str | None]) -> str | None:
    for value in values:
        if value:
            return value
    return None


def find_text(value: Any, keys: tuple[str, ...], depth: int = 0) -> str | None:
    """A human text from a value that may be JSON-wrapped: ``{"inputs": {"question": "..."}}``,
    ``{"choices": [{"message": {"content": "..."}}]}``, ``["query"]``, ..."""
    if depth > MAX_DEPTH or value is None:
        return None
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "[") and len(stripped) <= MAX_JSON_CHARS:
            try:
                parsed = json.loads(stripped)
            except (ValueError, RecursionError):
                return stripped or None
            return find_text(parsed, keys, depth + 1)
        return stripped or None
    if isinstance(value, dict):
        value = unwrap_serialized(value)
        if ("role" in value or "type" in value) and "content" in value:  # a chat message
            return find_text(value["content"], keys, depth + 1)
        for key in keys:
            if key in value:
                found = find_text(value[key], keys, depth + 1)
                if found:
                    return found
        if len(value) == 1:  # {"some_name": "..."}: the only value is the text
            return find_text(next(iter(value.values())), keys, depth + 1)
        return None  # guessing among several unknown keys could return the question as the answer
    if isinstance(value, list):
        if not value:
            return None
        if all(isinstance(v, dict) and ("role" in v or "type" in v) and "content" in v for v in value):
            # chat messages (OpenAI "role", LangChain "type"): the last user / assistant turn
            wanted = ("user", "human") if keys is QUESTION_KEYS else ("assistant", "ai", "model")
            for message in reversed(value):
                if str(message.get("role", message.get("type", ""))).lower() in wanted:
                    return find_text(message.get("content"), keys, depth + 1)
            return None
        # question: the first positional argument; answer: the first choice/generation
        return find_text(value[0], keys, depth + 1)
    return None
