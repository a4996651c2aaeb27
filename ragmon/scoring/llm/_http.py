"""The LLM judge's HTTP edge: one POST that survives a flaky endpoint (httpx stays in scoring/).

Per request, in order: circuit breaker -> client-side rpm/tpm limiter -> bounded concurrency ->
HTTP with retries (exponential backoff + jitter, ``Retry-After`` honoured) on 429/5xx/timeouts.
httpx errors become ``JudgeError`` subclasses here; every attempt is counted in
``ragmon_judge_requests_total{judge="llm",outcome}``. The API key is sent as a header and
scrubbed from any server message that echoes it.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import httpx

from ... import semconv as sc
from ...backoff import Backoff
from ...errors import JudgeCircuitOpenError, JudgeError, JudgeHTTPError, JudgeRateLimitedError, JudgeTimeoutError
from ..judge import JudgeMetrics
from ._settings import NAME, LlmJudgeSettings
from .resilience import CircuitBreaker, RateLimiter, parse_retry_after

log = logging.getLogger(__name__)

OUTCOME_RETRY: Final = "retry"  # a failed attempt that will be retried


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
            limits=httpx.Limits(
                max_connections=settings.concurrency, max_keepalive_connections=settings.concurrency
            ),
        )
        self._semaphore = asyncio.Semaphore(settings.concurrency)
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
                    f"judge endpoint considered down after repeated failures; retrying in "
                    f"{self.circuit.reset_s:g}s (circuit breaker open)"
                )
            retry_after: float | None = None
            failure: JudgeError
            try:
                await self._limiter.acquire(tokens)
                async with self._semaphore:
                    response = await self.client.post(path, json=body)
            except asyncio.CancelledError:
                self.circuit.release()  # a cancelled half-open trial must not wedge the breaker
                raise
            except httpx.TimeoutException:
                self.circuit.record_failure()
                failure = JudgeTimeoutError(f"judge request timed out after {self._settings.timeout_s:g}s")
            except httpx.HTTPError as exc:
                self.circuit.record_failure()
                failure = JudgeHTTPError(f"judge request failed: {type(exc).__name__}", status=None)
            else:
                status = response.status_code
                if 200 <= status < 300:
                    self.circuit.record_success()
                    return response
                # llama-cpp-python answers an unsupported response_format with a 500 naming it
                if format_fallback and status in (400, 422, 500) and _mentions_format(response, strict=status == 500):
                    self.circuit.release()
                    self.outcome(sc.FAIL_HTTP)
                    raise FormatRejected()
                retry_after, failure = self._failure(response)
            if failure.retriable and attempt < self._settings.max_retries:
                self.outcome(OUTCOME_RETRY)
                delay = self._backoff.delay(attempt, retry_after)
                log.debug("judge request failed (%s); retry %d in %.2fs", failure.reason, attempt + 1, delay)
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
        if status >= 500:
            self.circuit.record_failure()
            return _retry_after(response), JudgeHTTPError(f"judge endpoint answered HTTP {status}", status=status)
        self.circuit.release()
        message = _error_message(response)
        if self._settings.api_key:  # a proxy may echo the key back in its error message
            message = message.replace(self._settings.api_key, "***")
        return None, JudgeHTTPError(f"judge endpoint answered HTTP {status}: {message}", status=status)

    def _circuit_changed(self, state: str) -> None:
        if state == "open":
            log.warning("LLM judge circuit breaker opened: endpoint failing; traces fail fast as circuit_open")
        else:
            log.info("LLM judge circuit breaker %s", state)
        if self._metrics is not None:
            self._metrics.judge_circuit_open.labels(NAME).set(1 if state == "open" else 0)


def _retry_after(response: httpx.Response) -> float | None:
    return parse_retry_after(response.headers.get("retry-after"))


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
