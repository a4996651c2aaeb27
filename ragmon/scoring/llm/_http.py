"""The LLM judge's HTTP edge: one POST that survives a flaky endpoint (httpx stays in scoring/).

Per request, in order: circuit breaker -> client-side rpm/tpm limiter -> a free request slot
(``AdaptiveConcurrency``: AIMD on the server's latency, timeouts and 429/503/504) -> HTTP with
retries (exponential backoff + jitter, ``Retry-After`` honoured) on 429/5xx/timeouts/connection
errors. The timeout starts when the request is sent: waiting for a slot or a rate limit never
counts against it. Only a server that is down (connection refused, a 5xx other than 503/504, a
broken connection) counts towards the circuit breaker; a slow or busy one lowers the concurrency
instead. httpx errors become ``JudgeError`` subclasses named by their cause (timeout,
connect_error, http_error with the status, rate_limited); every attempt is counted in
``ragmon_judge_requests_total{judge="llm",outcome}``. The API key is sent as a header and
scrubbed from any server message that echoes it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import httpx

from ... import semconv as sc
from ...backoff import Backoff
from ...errors import (
    JudgeCircuitOpenError,
    JudgeConnectError,
    JudgeError,
    JudgeHTTPError,
    JudgeRateLimitedError,
    JudgeTimeoutError,
)
from ..judge import JudgeMetrics
from ._settings import NAME, LlmJudgeSettings
from .resilience import AdaptiveConcurrency, CircuitBreaker, RateLimiter, parse_retry_after

log = logging.getLogger(__name__)

OUTCOME_RETRY: Final = "retry"  # a failed attempt that will be retried
CHAT_PATH: Final = "chat/completions"  # its adaptive limit is the one shown in ragmon_judge_concurrency_limit
OVERLOADED: Final = frozenset({429, 503, 504})  # the server is alive and busy: fewer requests in flight


class FormatRejected(Exception):
    """The server answered 400/422 (or a 500 naming it) to a request carrying ``response_format``."""


class JudgeHttp:
    """POSTs JSON to the judge endpoint with the failure controls above; counts outcomes."""

    def __init__(
        self,
        settings: LlmJudgeSettings,
        metrics: JudgeMetrics | None,
        *,
        transport: httpx.AsyncBaseTransport | None,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
        rng: random.Random | None,
    ) -> None:
        self._settings = settings
        self._metrics = metrics
        self._sleep = sleep
        self._backoff = Backoff(settings.backoff_base_s, settings.backoff_max_s, rng=rng)
        headers = {"User-Agent": "ragmon-llm-judge"}
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
            if (urlsplit(settings.base_url).hostname or "").endswith(".azure.com"):
                headers["api-key"] = settings.api_key  # Azure OpenAI's own header
        self.client = httpx.AsyncClient(
            base_url=settings.base_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(settings.timeout_s),
            transport=transport,
            # the adaptive limits below bound the requests in flight (per path); the pool must never make
            # a request wait, or the wait would count against its timeout
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=settings.concurrency),
        )
        self._endpoint = settings.base_url.rstrip("/")
        # requests in flight, adapted to what the server shows (resilience.AdaptiveConcurrency): one
        # limit per path, so that quick embedding calls do not speak for slow chat calls
        self.concurrency = AdaptiveConcurrency(settings.concurrency, settings.timeout_s,
                                               on_change=self._concurrency_changed)
        self._other_paths: dict[str, AdaptiveConcurrency] = {}
        self.circuit = CircuitBreaker(
            settings.circuit_failures, settings.circuit_reset_s, clock=clock, on_change=self._circuit_changed
        )
        self._limiter = RateLimiter(settings.requests_per_minute, settings.tokens_per_minute, clock=clock, sleep=sleep)
        if metrics is not None:
            metrics.judge_circuit_open.labels(NAME).set(0)

    async def aclose(self) -> None:
        await self.client.aclose()

    def outcome(self, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.judge_requests.labels(NAME, outcome).inc()

    async def post(
        self, path: str, body: Mapping[str, Any], tokens: int, *, format_fallback: bool = False
    ) -> httpx.Response:
        """The 2xx response, or ``FormatRejected`` (with ``format_fallback``), or a ``JudgeError``."""
        attempt = 0
        while True:
            if not self.circuit.allow():
                self.outcome(sc.FAIL_CIRCUIT_OPEN)
                raise JudgeCircuitOpenError(
                    f"judge endpoint considered down after {self.circuit.failures} consecutive failures "
                    f"(last: {self.circuit.last_cause or 'unknown'}); retrying in {self.circuit.reset_s:g}s "
                    "(circuit breaker open)"
                )
            try:  # waiting here (rate limits, a free request slot) is no part of the request's timeout
                await self._limiter.acquire(tokens)
                concurrency = self._limit_for(path)
                taken = await concurrency.acquire()
            except asyncio.CancelledError:
                self.circuit.release()  # a cancelled half-open trial must not wedge the breaker
                raise
            retry_after: float | None = None
            failure: JudgeError
            started = time.perf_counter()
            try:
                response = await self.client.post(path, json=body)
            except asyncio.CancelledError:
                concurrency.release(taken)
                self.circuit.release()
                raise
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # nobody answers: the server is down
                concurrency.release(taken)
                failure = JudgeConnectError(
                    f"judge endpoint {self._endpoint} unreachable ({type(exc).__name__}: {_short(exc)})"
                )
                self.circuit.record_failure(str(failure))
            except httpx.TimeoutException:  # it answers, slowly: overloaded, not down
                concurrency.release(taken, overload=True)
                self.circuit.release()
                failure = JudgeTimeoutError(
                    f"judge request timed out: no reply within {self._settings.timeout_s:g}s of sending it "
                    f"(waiting for a free slot is not counted); requests in flight now at most "
                    f"{concurrency.limit}"
                )
            except httpx.HTTPError as exc:
                concurrency.release(taken)
                failure = JudgeHTTPError(f"judge request failed: {type(exc).__name__}", status=None)
                self.circuit.record_failure(str(failure))
            else:
                latency = time.perf_counter() - started
                status = response.status_code
                if 200 <= status < 300:
                    concurrency.release(taken, latency_s=latency)
                    self.circuit.record_success()
                    return response
                # llama-cpp-python answers an unsupported response_format with a 500 naming it
                if format_fallback and status in (400, 422, 500) and _mentions_format(response, strict=status == 500):
                    concurrency.release(taken, latency_s=latency)
                    self.circuit.release()
                    self.outcome(sc.FAIL_HTTP)
                    raise FormatRejected()
                concurrency.release(taken, overload=status in OVERLOADED)
                retry_after, failure = self._failure(response)
            if failure.retriable and attempt < self._settings.max_retries:
                self.outcome(OUTCOME_RETRY)
                delay = self._backoff.delay(attempt, retry_after)
                log.debug("judge request failed (%s: %s); retry %d in %.2fs", failure.reason, failure, attempt + 1,
                          delay)
                attempt += 1
                await self._sleep(delay)
                continue
            self.outcome(failure.reason)
            raise failure

    def _failure(self, response: httpx.Response) -> tuple[float | None, JudgeError]:
        """A non-2xx answer as (Retry-After, error), with the circuit breaker told."""
        status = response.status_code
        if status == 429:
            self.circuit.release()  # alive, just busy: not a reason to open the circuit
            return _retry_after(response), JudgeRateLimitedError("judge endpoint rate-limited the request (HTTP 429)")
        if status in OVERLOADED:  # 503 no free slot / loading, 504 a proxy's upstream too slow: busy, not down
            self.circuit.release()
            return _retry_after(response), JudgeHTTPError(
                f"judge endpoint answered HTTP {status} (busy): {self._message(response)}", status=status)
        if status >= 500:
            failure = JudgeHTTPError(f"judge endpoint answered HTTP {status}: {self._message(response)}", status=status)
            self.circuit.record_failure(str(failure))
            return _retry_after(response), failure
        self.circuit.release()
        return None, JudgeHTTPError(f"judge endpoint answered HTTP {status}: {self._message(response)}", status=status)

    def _message(self, response: httpx.Response) -> str:
        message = _error_message(response)
        if self._settings.api_key:  # a proxy may echo the key back in its error message
            message = message.replace(self._settings.api_key, "***")
        return message

    def _limit_for(self, path: str) -> AdaptiveConcurrency:
        if path == CHAT_PATH:
            return self.concurrency
        if path not in self._other_paths:
            self._other_paths[path] = AdaptiveConcurrency(self._settings.concurrency, self._settings.timeout_s)
        return self._other_paths[path]

    def _concurrency_changed(self, limit: int) -> None:
        log.debug("LLM judge: at most %d requests in flight", limit)
        if self._metrics is not None:
            self._metrics.judge_concurrency_limit.labels(NAME).set(limit)

    def _circuit_changed(self, state: str) -> None:
        if state == "open":
            log.warning("LLM judge circuit breaker opened: endpoint failing (%s); traces fail fast as circuit_open",
                        self.circuit.last_cause)
        else:
            log.info("LLM judge circuit breaker %s", state)
        if self._metrics is not None:
            self._metrics.judge_circuit_open.labels(NAME).set(1 if state == "open" else 0)


def _retry_after(response: httpx.Response) -> float | None:
    return parse_retry_after(response.headers.get("retry-after"))


def _short(exc: BaseException) -> str:
    return (str(exc) or "no detail")[:160]


def _error_message(response: httpx.Response) -> str:
    """The server's error message (OpenAI shape), short; never echoes request headers."""
    try:
        error = response.json().get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        message = response.text
    return str(message or "")[:200]


def _mentions_format(response: httpx.Response, strict: bool = False) -> bool:
    text = response.text.lower()
    if strict:
        return "response_format" in text
    return not text.strip() or any(word in text for word in ("response_format", "json_schema", "schema", "json"))
