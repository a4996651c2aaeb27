"""Message readers: the chat messages of a generator span, as ``(role, text, payload)``.

OpenInference ``llm.{input,output}_messages.{i}.message.{role,content}``, OTel GenAI
``gen_ai.{system_instructions,input.messages,output.messages}`` (JSON parts) and OpenLLMetry
``gen_ai.{prompt,completion}.{i}.{role,content}``. Also: documents recovered from the messages
when a retrieval span carried ids only, or when there is no retrieval span at all.

Recovering contexts (each result says where it came from: a ``semconv.CONTEXTS_*`` value)
    1. by id: structured tool results (``{"id", "content"}``), else text that labels each document
       with its id at the start of a line (``[kb-1] text``, ``kb-1: text``, ``<doc id="kb-1">``,
       ``Document kb-1`` ...; a document's text runs to the next label, and the last one stops
       before the question);
    2. by position: as many context messages (or parts) as documents, in order;
    3. otherwise the user message minus the question, as one context marked
       ``ragmon.contexts.source=user_message`` (not attributable to any document).
    The system instructions (``gen_ai.system_instructions``) are never a context.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ... import semconv as sc
from ...doc_ids import content_id
from ...types import AttrValue, Document, SpanRecord
from ._documents import dedupe_and_rank, documents_from_json, with_content
from ._text import span_output
from ._values import indexed_fields, json_text, maybe_json, to_str

Message = tuple[str, str, Any]
"""(role, text, the text parsed as JSON when it is JSON, else the text or ``None``)."""

ROLE_INSTRUCTIONS = "system_instructions"
"""Role given to OTel GenAI ``gen_ai.system_instructions``: instructions, never a context."""
_USER_ROLES = ("user", "human")
_MODEL_ROLES = ("assistant", "ai", "model")
_SYSTEM_ROLES = ("system", "developer", ROLE_INSTRUCTIONS)


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
    out.extend((ROLE_INSTRUCTIONS, text, payload) for _, text, payload in instructions)
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


def fill_from_messages(docs: list[Document], messages: list[Message], question: str | None,
                       keys: Sequence[str]) -> tuple[list[Document], str]:
    """Ids-only documents (OTel GenAI retrieval) get their text from the chat's input messages.

    Returns the documents and where their text came from (module doc): by id, by position, or
    the user message minus the question appended as one marked context; else unchanged."""
    by_id: dict[str, str] = {}
    for role, _, payload in messages:
        if role in _MODEL_ROLES or payload is None:
            continue
        for found in documents_from_json(payload, keys):
            if found.content:
                by_id.setdefault(found.id, found.content)
    if not any(d.id in by_id for d in docs):
        by_id = _labelled_texts([d.id for d in docs], messages, question)
    if any(d.id in by_id for d in docs):
        return [with_content(d, by_id.get(d.id)) for d in docs], sc.CONTEXTS_MESSAGE_ID
    chunks = _context_chunks(messages, question)
    if len(chunks) == len(docs) + 1 and chunks[0][0] in _SYSTEM_ROLES:
        chunks = chunks[1:]  # one too many: the leading system message is the instructions
    # one system message for one document reads as the instructions more often than as context
    ambiguous = len(chunks) == 1 and chunks[0][0] in _SYSTEM_ROLES
    if chunks and len(chunks) == len(docs) and not ambiguous:
        return ([with_content(d, text) for d, (_, text) in zip(docs, chunks, strict=True)],
                sc.CONTEXTS_MESSAGE_POSITION)
    rest = user_message_context(messages, question)
    if rest is not None:
        return [*docs, _fallback_document(rest, len(docs))], sc.CONTEXTS_USER_MESSAGE
    return docs, sc.CONTEXTS_NONE


def documents_from_messages(messages: list[Message], question: str | None,
                            keys: Sequence[str]) -> tuple[list[Document], str]:
    """No retrieval span at all: documents passed to the model in tool results or context
    messages, else the user message minus the question when what is left reads like context."""
    docs: list[Document] = []
    for role, _, payload in messages:
        if role == "tool" and payload is not None:
            docs.extend(documents_from_json(payload, keys))
    if not docs:
        docs = [Document(id=content_id(text), content=text) for _, text in _context_chunks(messages, question)
                if _looks_like_context(text)]
    if docs:
        return dedupe_and_rank(docs), sc.CONTEXTS_MESSAGES
    rest = user_message_context(messages, question)
    if rest is not None and _looks_like_context(rest):
        return [_fallback_document(rest, 0)], sc.CONTEXTS_USER_MESSAGE
    return [], sc.CONTEXTS_NONE


def _looks_like_context(text: str) -> bool:
    # A one-line system prompt ("You are a helpful assistant.") is not retrieved context.
    return len(text) >= 200 or text.count("\n") >= 2


def _contains(text: str, question: str | None) -> bool:
    return question is not None and bool(question.strip()) and question.strip() in text


def _context_chunks(messages: list[Message], question: str | None) -> list[tuple[str, str]]:
    """(role, text) of the messages that are neither the question (nor hold it), the model's own
    turns, nor the system instructions."""
    chunks: list[tuple[str, str]] = []
    last_user = last_message(messages, _USER_ROLES)
    for role, text, _ in messages:
        if role in _MODEL_ROLES or role == ROLE_INSTRUCTIONS:
            continue
        if role in _USER_ROLES and (_contains(text, question) or (question is None and text == last_user)):
            continue
        chunks.append((role, text))
    return chunks


def _fallback_document(text: str, rank: int) -> Document:
    return Document(id=content_id(text), content=text, rank=rank,
                    metadata={sc.RAGMON_CONTEXTS_SOURCE: sc.CONTEXTS_USER_MESSAGE})


_LABEL_LINE = re.compile(r"[^\n]{0,40}:[ \t]*")  # "Question:", "Context:", "Sources:"


def user_message_context(messages: list[Message], question: str | None) -> str | None:
    """The last user message that holds the question, with the question (and a dangling
    ``Question:`` label) taken out; None when nothing is left or the question is unknown."""
    if not question or not question.strip():
        return None
    q = question.strip()
    for role, text, _ in reversed(messages):
        if role not in _USER_ROLES or q not in text:
            continue
        at = text.rfind(q)
        rest = _strip_labels(text[:at] + text[at + len(q):])
        return rest if any(ch.isalnum() for ch in rest) else None
    return None


def _strip_labels(text: str) -> str:
    lines = text.strip().split("\n")
    while lines and _LABEL_LINE.fullmatch(lines[-1].strip()):
        lines.pop()
    while lines and _LABEL_LINE.fullmatch(lines[0].strip()):
        lines.pop(0)
    return "\n".join(lines).strip()


# --- documents labelled with their id in the prompt text ---------------------------------------
# What may stand between the start of a line and a document id: bullets, numbering, brackets
# and at most two words ("[", "1. ", "Document ", "Source: ", '<doc id="'); after it: closing
# brackets or quotes and one separator ("]", '">', ":", " -", "|").
_MARK_PREFIX = re.compile(r"[\W\d_]{0,12}(?:[A-Za-z]{1,20}(?:[ _-][A-Za-z]{1,20})?[\W_]{0,6})?")
_MARK_SUFFIX = re.compile(r"[\"'\])>}]*[ \t]*(?:[:|>\-–—][ \t]*)?")
_CLOSING_TAG = re.compile(r"\s*</[A-Za-z_][\w-]{0,30}>\s*\Z")
_MAX_IDS = 1_000  # more documents than any prompt holds: do not build an absurd regex


def _labelled_texts(ids: list[str], messages: list[Message], question: str | None) -> dict[str, str]:
    """``{id: text}`` for the documents whose id labels a passage in the input messages."""
    wanted = sorted({i for i in ids if i}, key=len, reverse=True)[:_MAX_IDS]
    if not wanted:
        return {}
    finder = re.compile(r"(?<![\w-])(?:" + "|".join(re.escape(i) for i in wanted) + r")(?![\w-])")
    found: dict[str, str] = {}
    for role, text, _ in messages:
        if role in _MODEL_ROLES:
            continue
        for doc_id, passage in _passages(text, finder, question):
            if passage and doc_id not in found:
                found[doc_id] = passage
    return found


def _passages(text: str, finder: re.Pattern[str], question: str | None) -> list[tuple[str, str]]:
    marks: list[tuple[str, int, int]] = []  # (id, start of its line, start of its text)
    for match in finder.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if not _MARK_PREFIX.fullmatch(text, line_start, match.start()):
            continue  # the id is mentioned inside a sentence, not labelling a passage
        suffix = _MARK_SUFFIX.match(text, match.end())
        marks.append((match.group(), line_start, suffix.end() if suffix else match.end()))
    if not marks:
        return []
    raw: list[tuple[str, str]] = []
    for i, (doc_id, _, start) in enumerate(marks):
        end = marks[i + 1][1] if i + 1 < len(marks) else len(text)
        raw.append((doc_id, text[start:end]))
    # The last passage runs to the end of the message: stop it before the question, and at its
    # first blank line when no other passage has one (the prompt's own text follows it).
    last_id, last = raw[-1]
    if question and question.strip() and question.strip() in last:
        last = last[: last.rfind(question.strip())]
    if len(raw) > 1 and not any("\n\n" in passage.strip() for _, passage in raw[:-1]):
        last = last.strip().split("\n\n", 1)[0]
    raw[-1] = (last_id, last)
    return [(doc_id, _clean(passage)) for doc_id, passage in raw]


def _clean(passage: str) -> str:
    return _strip_labels(_CLOSING_TAG.sub("", passage.strip()))
