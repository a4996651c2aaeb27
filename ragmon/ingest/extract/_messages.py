"""Message readers: the chat messages of a generator span, as ``(role, text, payload)``.

OpenInference ``llm.{input,output}_messages.{i}.message.{role,content}``, OTel GenAI
``gen_ai.{system_instructions,input.messages,output.messages}`` (JSON parts) and OpenLLMetry
``gen_ai.{prompt,completion}.{i}.{role,content}``. Also: documents recovered from the messages
when a retrieval span carried ids only, or when there is no retrieval span at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ... import semconv as sc
from ...doc_ids import content_id
from ...types import AttrValue, Document, SpanRecord
from ._documents import dedupe_and_rank, documents_from_json, with_content
from ._text import span_output
from ._values import indexed_fields, json_text, maybe_json, to_str

Message = tuple[str, str, Any]
"""(role, text, the text parsed as JSON when it is JSON, else the text or ``None``)."""


def generator_output(span: SpanRecord) -> str | None:
    attrs = span.attributes
    out = last_message(_flattened_messages(attrs, sc.LLM_OUTPUT_MESSAGES_PREFIX), ("assistant", "ai", "model", ""))
    out = out or last_message(_genai_messages(attrs.get(sc.GEN_AI_OUTPUT_MESSAGES)), ("assistant", "model", ""))
    out = out or last_message(_flattened_messages(attrs, sc.GEN_AI_COMPLETION_PREFIX), ("assistant", ""))
    return out or span_output(span)


def input_messages(span: SpanRecord) -> list[Message]:
    """(role, text, structured payload or None) for every input message of a generator span."""
    attrs = span.attributes
    out: list[Message] = []
    instructions = _genai_messages(attrs.get(sc.GEN_AI_SYSTEM_INSTRUCTIONS), default_role="system")
    out.extend(instructions)
    readers: tuple[Callable[[], list[Message]], ...] = (
        lambda: _flattened_messages(attrs, sc.LLM_INPUT_MESSAGES_PREFIX),
        lambda: _genai_messages(attrs.get(sc.GEN_AI_INPUT_MESSAGES)),
        lambda: _flattened_messages(attrs, sc.GEN_AI_PROMPT_PREFIX),
    )
    for reader in readers:
        found = reader()
        if found:
            out.extend(found)
            break
    return out


def _flattened_messages(attrs: Mapping[str, AttrValue], prefix: str) -> list[Message]:
    """``llm.input_messages.{i}.message.{role,content}`` and ``gen_ai.prompt.{i}.{role,content}``."""
    raw = indexed_fields(attrs, prefix + ".", "")
    rows = {i: {k.removeprefix("message."): v for k, v in f.items()} for i, f in raw.items()}
    out: list[Message] = []
    for index in sorted(rows):
        text = to_str(rows[index].get("content"))
        if text:
            out.append(((to_str(rows[index].get("role")) or "").lower(), text, maybe_json(text)))
    return out


def _genai_messages(value: AttrValue, default_role: str = "") -> list[Message]:
    """OTel GenAI ``[{"role", "parts": [{"type": "text", "content"}, ...]}]`` (or OpenAI-style
    ``{"role", "content"}``), as JSON text or a decoded list."""
    parsed = maybe_json(value)
    if isinstance(parsed, dict):
        parsed = [parsed]
    if not isinstance(parsed, list):
        return []
    out: list[Message] = []
    for message in parsed:
        if isinstance(message, str):
            out.append((default_role, message, None))
            continue
        if not isinstance(message, dict):
            continue
        if "type" in message and "role" not in message:  # a bare part (system_instructions)
            message = {"role": default_role, "parts": [message]}
        role = (to_str(message.get("role")) or default_role).lower()
        parts = message.get("parts")
        if not isinstance(parts, list):
            content = message.get("content")
            parts = content if isinstance(content, list) else [{"type": "text", "content": content}]
        for part in parts:
            if isinstance(part, str):
                out.append((role, part, maybe_json(part)))
                continue
            if not isinstance(part, dict):
                continue
            if "response" in part or "result" in part:  # tool_call_response
                payload = maybe_json(part.get("response", part.get("result")))
                text = payload if isinstance(payload, str) else json_text(payload)
                if text:
                    out.append(("tool", text, payload))
                continue
            text = to_str(part.get("content")) or to_str(part.get("text"))
            if text:
                out.append((role, text, maybe_json(text)))
    return out


def last_message(messages: list[Message], roles: tuple[str, ...]) -> str | None:
    for role, text, _ in reversed(messages):
        if role in roles or (not role and "" in roles):
            return text
    return None


def fill_from_messages(docs: list[Document], messages: list[Message],
                       question: str | None) -> list[Document]:
    """Ids-only documents (OTel GenAI retrieval) get their text from the chat's messages."""
    by_id: dict[str, str] = {}
    for _, _, payload in messages:
        for found in documents_from_json(payload) if payload is not None else []:
            if found.content:
                by_id.setdefault(found.id, found.content)
    if any(d.id in by_id for d in docs):
        return [with_content(d, by_id.get(d.id)) for d in docs]
    chunks = _context_chunks(messages, question)
    if len(chunks) == len(docs):
        return [with_content(d, text) for d, text in zip(docs, chunks, strict=True)]
    return docs


def documents_from_messages(messages: list[Message], question: str | None) -> list[Document]:
    """No retrieval span at all: documents passed to the model in tool results or context messages."""
    docs: list[Document] = []
    for role, _, payload in messages:
        if role == "tool" and payload is not None:
            docs.extend(documents_from_json(payload))
    if not docs:
        docs = [Document(id=content_id(text), content=text) for text in _context_chunks(messages, question)
                if _looks_like_context(text)]
    return dedupe_and_rank(docs)


def _looks_like_context(text: str) -> bool:
    # A one-line system prompt ("You are a helpful assistant.") is not retrieved context.
    return len(text) >= 200 or text.count("\n") >= 2


def _context_chunks(messages: list[Message], question: str | None) -> list[str]:
    """Message texts that are neither the question nor the model's own turns."""
    chunks: list[str] = []
    last_user = last_message(messages, ("user", "human"))
    for role, text, _ in messages:
        if role in ("assistant", "ai", "model"):
            continue
        if role in ("user", "human") and text == last_user and (question is None or text.strip() == question.strip()):
            continue
        chunks.append(text)
    return chunks
