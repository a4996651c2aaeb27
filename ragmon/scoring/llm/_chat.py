"""The OpenAI-compatible protocol over ``JudgeHttp``: chat calls that return JSON, embeddings,
and the tokens they cost.

A chat call asks for ``response_format`` json_schema, falling back to json_object and then
plain text when the server rejects it (remembered for later calls); an unusable reply gets one
repair attempt. Tokens come from the reply's ``usage``, estimated when it has none, and are
added to the trace's ``Usage`` and to ``ragmon_judge_tokens_total``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import httpx
import numpy as np

from ... import semconv as sc
from ...errors import JudgeReplyError, JudgeReplyTruncatedError
from ..judge import JudgeMetrics
from . import prompts as p
from ._http import CHAT_PATH, FormatRejected, JudgeHttp
from ._settings import NAME, LlmJudgeSettings
from .verdicts import VerdictError, extract_json

log = logging.getLogger(__name__)

T = TypeVar("T")
# response_format levels, tried in this order; a server that rejects one gets the next
FORMAT_JSON_SCHEMA: Final = "json_schema"
FORMAT_JSON_OBJECT: Final = "json_object"
FORMAT_NONE: Final = "none"
_FORMAT_FALLBACK = {FORMAT_JSON_SCHEMA: FORMAT_JSON_OBJECT, FORMAT_JSON_OBJECT: FORMAT_NONE}


@dataclass
class Usage:
    """Tokens and calls spent on one trace."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    estimated: bool = False  # some reply had no ``usage``

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ChatClient:
    """JSON-returning chat calls and embeddings against one endpoint and model."""

    def __init__(self, http: JudgeHttp, settings: LlmJudgeSettings, metrics: JudgeMetrics | None) -> None:
        self._http = http
        self._settings = settings
        self._metrics = metrics
        self.response_format: str = FORMAT_JSON_SCHEMA

    async def json_call(
        self, messages: list[p.Message], schema_name: str, schema: Mapping[str, Any],
        parse: Callable[[dict[str, Any]], T], usage: Usage, temperature: float | None = None,
    ) -> T:
        """One chat call parsed by ``parse``, with one repair attempt when the reply is unusable."""
        content, cut_off = await self._chat(messages, schema_name, schema, usage, temperature)
        try:
            result = parse(extract_json(content))
        except VerdictError as first_error:
            self._http.outcome(_unusable_outcome(cut_off))
            log.debug("judge reply unusable (%s%s); one repair attempt", first_error, ", cut off" if cut_off else "")
            problem = (f"it was cut off at the {self._settings.max_completion_tokens}-token limit; keep every "
                       "text field short" if cut_off else str(first_error))
            repair = p.repair_messages(messages, content, problem)
            content, cut_off = await self._chat(repair, schema_name, schema, usage, temperature)
            try:
                result = parse(extract_json(content))
            except VerdictError as second_error:
                self._http.outcome(_unusable_outcome(cut_off))
                if cut_off:
                    raise JudgeReplyTruncatedError(
                        "judge reply still invalid after one repair attempt: cut off at max_tokens "
                        f"({self._settings.max_completion_tokens}; RAGMON_JUDGE_MAX_COMPLETION_TOKENS): {second_error}"
                    ) from second_error
                raise JudgeReplyError(
                    f"judge reply still invalid after one repair attempt: {second_error}"
                ) from second_error
        self._http.outcome(sc.OUTCOME_OK)
        return result

    async def embed(self, model: str, texts: list[str], usage: Usage) -> np.ndarray:
        """Unit vectors of ``texts`` from ``POST embeddings``."""
        body = {"model": model, "input": texts}
        response = await self._http.post("embeddings", body, body_tokens(texts))
        try:
            data = response.json()["data"]
            rows = sorted(data, key=lambda d: d.get("index", 0))
            vectors = np.array([row["embedding"] for row in rows], dtype=np.float32)
            if vectors.shape[0] != len(texts):
                raise ValueError("wrong number of embeddings")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self._http.outcome(sc.FAIL_INVALID_REPLY)
            raise JudgeReplyError("the embeddings endpoint returned an unusable body") from exc
        self._http.outcome(sc.OUTCOME_OK)
        prompt_tokens = _usage_int(response, "prompt_tokens")
        self._add_tokens(usage, prompt_tokens if prompt_tokens is not None else body_tokens(texts), 0,
                         estimated=prompt_tokens is None)
        return vectors

    async def _chat(
        self, messages: list[p.Message], schema_name: str, schema: Mapping[str, Any], usage: Usage,
        temperature: float | None,
    ) -> tuple[str, bool]:
        """The reply's text, and whether the server cut it off at ``max_tokens``."""
        estimate = p.estimate_message_tokens(messages)
        while True:
            body: dict[str, Any] = {
                "model": self._settings.model,
                "messages": messages,
                "temperature": self._settings.temperature if temperature is None else temperature,
                "max_tokens": self._settings.max_completion_tokens,
            }
            if self.response_format == FORMAT_JSON_SCHEMA:
                body["response_format"] = {
                    "type": "json_schema", "json_schema": {"name": schema_name, "schema": schema, "strict": True},
                }
            elif self.response_format == FORMAT_JSON_OBJECT:
                # "schema" is ignored by most servers; llama.cpp servers turn it into a grammar
                body["response_format"] = {"type": "json_object", "schema": schema}
            try:
                response = await self._http.post(
                    CHAT_PATH, body, estimate + self._settings.max_completion_tokens,
                    format_fallback=self.response_format != FORMAT_NONE,
                )
            except FormatRejected:
                rejected = body.get("response_format", {}).get("type", FORMAT_NONE)
                if self.response_format == rejected:  # concurrent calls may have downgraded already
                    self.response_format = _FORMAT_FALLBACK.get(rejected, FORMAT_NONE)
                    log.info("judge endpoint rejected response_format %s; using %s from now on",
                             rejected, self.response_format)
                continue
            return self._read_completion(response, messages, usage)

    def _read_completion(self, response: httpx.Response, messages: list[p.Message], usage: Usage
                         ) -> tuple[str, bool]:
        try:
            data = response.json()
            choice = data["choices"][0]
            message = choice["message"]
            content = message.get("content") or ""
            if not isinstance(content, str):
                raise TypeError("content is not a string")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            self._http.outcome(sc.FAIL_INVALID_REPLY)
            raise JudgeReplyError("the judge endpoint returned a body that is not a chat completion") from exc
        prompt_tokens = _usage_int(response, "prompt_tokens", data)
        completion_tokens = _usage_int(response, "completion_tokens", data)
        estimated = prompt_tokens is None or completion_tokens is None
        self._add_tokens(
            usage,
            prompt_tokens if prompt_tokens is not None else p.estimate_message_tokens(messages),
            completion_tokens if completion_tokens is not None else p.estimate_tokens(content),
            estimated=estimated,
        )
        return content, choice.get("finish_reason") == "length"

    def count_invalid_contradictions(self, invalid: Mapping[str, int]) -> None:
        if self._metrics is not None:
            for reason, n in invalid.items():
                self._metrics.judge_invalid_contradictions.labels(NAME, reason).inc(n)

    def _add_tokens(self, usage: Usage, prompt_tokens: int, completion_tokens: int, *, estimated: bool) -> None:
        usage.prompt_tokens += prompt_tokens
        usage.completion_tokens += completion_tokens
        usage.calls += 1
        usage.estimated = usage.estimated or estimated
        if self._metrics is not None:
            self._metrics.judge_tokens.labels(NAME, "prompt").inc(prompt_tokens)
            self._metrics.judge_tokens.labels(NAME, "completion").inc(completion_tokens)


def _unusable_outcome(cut_off: bool) -> str:
    return sc.FAIL_REPLY_TRUNCATED if cut_off else sc.FAIL_INVALID_REPLY


def body_tokens(texts: Sequence[str]) -> int:
    return sum(p.estimate_tokens(t) for t in texts)


def _usage_int(response: httpx.Response, key: str, data: Any = None) -> int | None:
    if data is None:
        try:
            data = response.json()
        except ValueError:
            return None
    usage = data.get("usage") if isinstance(data, dict) else None
    value = usage.get(key) if isinstance(usage, dict) else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else None
