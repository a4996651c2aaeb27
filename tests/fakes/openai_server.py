"""An OpenAI-protocol test server over real HTTP: the one stand-in ragmon's tests allow.

It speaks the real JSON shapes of ``POST /v1/chat/completions`` and ``POST /v1/embeddings``
on 127.0.0.1 (a free port), replies from a script, and records every request.

Usage::

    async with FakeOpenAI() as server:            # or: await server.start(); ...; await server.stop()
        server.base_url                            # "http://127.0.0.1:<port>/v1" -> judge_base_url
        server.enqueue(                            # consumed in order, one per chat request
            Reply.json({"claims": [], ...}),       # a completion whose content is this JSON
            Reply.error(429, retry_after="2"),     # 429 with a Retry-After header
            Reply.error(500),
            Reply.slow(5.0, then=Reply.json(...)), # sleeps first (client timeout)
            Reply.text("not json"),                # content that is not JSON (also: truncated JSON)
            Reply.json(..., usage=None),           # no "usage" object in the reply
            Reply.raw('{"oops": 1}'),              # a body that is not a chat completion
        )
        server.reject_formats = {"json_schema"}    # 400 for requests with that response_format type
        server.requests                            # [Recorded(path, headers, body)], embeddings included
        server.chat_requests                       # only /v1/chat/completions
        server.max_in_flight                       # most slow (delayed) replies pending at once
        server.slots = 1                           # like a llama.cpp server with one slot: a delayed reply
                                                   # waits for the one before it (None: no limit)

When the queue is empty a chat request is answered by ``server.responder(body)`` — by default
``compact_responder``: a deterministic, schema-valid compact-mode judgement (every answer
sentence is a claim, supported when most of its words occur in the contexts; every context
relevant when it shares a word with the question; the user's question echoed as the
generated question; for the evaluation variant, every reference sentence is a reference claim,
attributed / in the answer / an answer claim in the reference / a citation supported by the same
60 % word-share rule against the contexts, the answer, the reference and the cited context).
Embeddings are deterministic hashed bag-of-words unit vectors, so texts with the same words get
cosine 1.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

EMBEDDING_DIM = 64


@dataclass(frozen=True)
class Reply:
    """One scripted behaviour for a chat request."""

    status: int = 200
    content: str | None = None  # the assistant message content (200 replies)
    usage: tuple[int, int] | None = (100, 50)  # (prompt, completion); None = omit "usage"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    raw_body: str | None = None  # sent verbatim instead of a chat completion
    finish_reason: str = "stop"

    @staticmethod
    def json(obj: Any, usage: tuple[int, int] | None = (100, 50)) -> Reply:
        return Reply(content=json.dumps(obj), usage=usage)

    @staticmethod
    def text(content: str, usage: tuple[int, int] | None = (100, 50), finish_reason: str = "stop") -> Reply:
        return Reply(content=content, usage=usage, finish_reason=finish_reason)

    @staticmethod
    def error(status: int, retry_after: str | None = None, message: str = "scripted error") -> Reply:
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        body = json.dumps({"error": {"message": message, "type": "server_error", "code": status}})
        return Reply(status=status, headers=headers, raw_body=body)

    @staticmethod
    def slow(delay_s: float, then: Reply | None = None) -> Reply:
        base = then or Reply.json({})
        return Reply(base.status, base.content, base.usage, base.headers, delay_s, base.raw_body, base.finish_reason)

    @staticmethod
    def raw(body: str, status: int = 200) -> Reply:
        return Reply(status=status, raw_body=body)


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float


class FakeOpenAI:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self.queue: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.reject_formats: set[str] = set()
        self.responder: Callable[[dict[str, Any]], Reply] = compact_responder
        self.model = "fake-judge"
        self.in_flight = 0
        self.max_in_flight = 0  # most chat requests being handled at once (for concurrency bounds)
        self.slots: int | None = None  # delayed replies worked on at once; the others queue (a local server)
        self._slot_semaphore: asyncio.Semaphore | None = None
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def chat_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def enqueue(self, *replies: Reply) -> None:
        self.queue.extend(replies)

    async def start(self) -> FakeOpenAI:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/embeddings", self._embeddings)
        # handler_cancellation: a slow reply stops when the client gives up, so stop() is quick
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeOpenAI:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _record(self, request: web.Request) -> Any:
        text = await request.text()
        try:
            body = json.loads(text)
        except ValueError:
            body = text
        self.requests.append(Recorded(request.path, dict(request.headers), body, time.monotonic()))
        return body

    async def _chat(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        if not isinstance(body, dict) or "messages" not in body:
            return _error_response(400, "'messages' is required")
        fmt = (body.get("response_format") or {}).get("type")
        if fmt in self.reject_formats:
            return _error_response(400, f"response_format type {fmt!r} is not supported by this server")
        reply = self.queue.popleft() if self.queue else self.responder(body)
        if reply.delay_s:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                if self.slots is not None:
                    if self._slot_semaphore is None:
                        self._slot_semaphore = asyncio.Semaphore(self.slots)
                    async with self._slot_semaphore:  # queued behind the requests being worked on
                        await asyncio.sleep(reply.delay_s)
                else:
                    await asyncio.sleep(reply.delay_s)
            finally:
                self.in_flight -= 1
        if reply.raw_body is not None:
            return web.Response(status=reply.status, text=reply.raw_body, headers=reply.headers,
                                content_type="application/json")
        completion: dict[str, Any] = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": reply.finish_reason,
            }],
        }
        if reply.usage is not None:
            completion["usage"] = {
                "prompt_tokens": reply.usage[0], "completion_tokens": reply.usage[1],
                "total_tokens": reply.usage[0] + reply.usage[1],
            }
        return web.json_response(completion, status=reply.status, headers=reply.headers)

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        inputs = body.get("input") if isinstance(body, dict) else None
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not all(isinstance(t, str) for t in inputs):
            return _error_response(400, "'input' must be a string or a list of strings")
        data = [{"object": "embedding", "index": i, "embedding": hashed_embedding(t)} for i, t in enumerate(inputs)]
        tokens = sum(len(_words(t)) for t in inputs)
        return web.json_response({
            "object": "list", "data": data, "model": body.get("model", self.model),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        })


def _error_response(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=status)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def hashed_embedding(text: str) -> list[float]:
    vector = [0.0] * EMBEDDING_DIM
    for word in _words(text):
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % EMBEDDING_DIM] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


_FENCED = re.compile(r"<(untrusted-data-[0-9a-f]+)>\n(.*)\n</\1>", re.DOTALL)


def fenced_payload(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON document a ragmon judge prompt carries between its fence lines."""
    for message in body.get("messages", []):
        match = _FENCED.search(message.get("content") or "")
        if match:
            payload: dict[str, Any] = json.loads(match.group(2))
            return payload
    raise ValueError("no fenced payload in the request")


def compact_responder(body: dict[str, Any]) -> Reply:
    """A deterministic compact-mode judgement computed from the fenced payload (see module doc)."""
    try:
        payload = fenced_payload(body)
    except ValueError:
        return Reply.json({})
    contexts = list(payload.get("contexts", {}).values())  # {"context 1": text, ...} in rank order
    context_words = set(_words(" ".join(contexts)))
    question_words = set(_words(payload.get("question", "")))
    claims = []
    for number, sentence in enumerate(payload.get("answer_sentences", {}).values(), start=1):
        words = _words(sentence)
        if words:
            share = sum(w in context_words for w in words) / len(words)
            claims.append({"sentence": number, "claim": sentence, "supported": share >= 0.6})
    verdict: dict[str, Any] = {
        "claims": claims,
        "context_relevant": {
            f"context {i}": bool(question_words & set(_words(c))) for i, c in enumerate(contexts, start=1)
        },
        "questions": [payload.get("question", "")],
        "noncommittal": False,
    }
    # the evaluation variant (``ragmon eval``): the same word-share rule against the reference,
    # the answer and each cited context
    if "reference_sentences" in payload:
        reference_words = set(_words(" ".join(payload["reference_sentences"].values())))
        answer_words = set(_words(" ".join(payload.get("answer_sentences", {}).values())))
        for claim in claims:
            claim["in_reference"] = _share(claim["claim"], reference_words) >= 0.6
        verdict["reference_claims"] = [
            {"sentence": number, "claim": sentence, "attributed": _share(sentence, context_words) >= 0.6,
             "in_answer": _share(sentence, answer_words) >= 0.6}
            for number, sentence in enumerate(payload["reference_sentences"].values(), start=1)
            if _words(sentence)
        ]
    if "citations" in payload:
        by_name = payload.get("contexts", {})
        verdict["citation_supported"] = {
            name: _share(item["claim"], set(_words(by_name.get(item["context"], "")))) >= 0.6
            for name, item in payload["citations"].items()
        }
    return Reply.json(verdict)


def _share(text: str, vocabulary: set[str]) -> float:
    """Share of ``text``'s words found in ``vocabulary`` (0 for a text without words)."""
    words = _words(text)
    return sum(w in vocabulary for w in words) / len(words) if words else 0.0
