"""The agent's HTTP face on the metrics port: /metrics, /healthz, /readyz, /worst, /traces/{trace_id}.

/metrics negotiates the exposition format: OpenMetrics (which carries the trace-id
exemplars on score histograms) when the scraper asks for it, as Prometheus does, else the
classic text format. The exposition is rendered in a worker thread, so a large scrape never
stalls the event loop (the OTLP receiver and /healthz keep answering meanwhile).

/worst and /traces/{trace_id} (the trace inspector) serve question, context and answer text.
They are guarded (docs/security.md): with a bearer token configured they need
``Authorization: Bearer <token>``; without one they answer only when the server listens on
loopback or the operator waived the rule explicitly (``--insecure-allow-unauthenticated-bind``),
else 403. /metrics, /healthz and /readyz carry no trace content and stay open for Prometheus
and the kubelet. Optional TLS covers every path.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Callable
from typing import Any

from aiohttp import hdrs, web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from .._security import BearerToken, is_loopback
from ..errors import ConfigError

ReadinessProbe = Callable[[], tuple[bool, dict[str, Any]]]
WorstProvider = Callable[[], list[dict[str, Any]]]
TraceLookup = Callable[[str], dict[str, Any] | None]  # trace id -> the inspector's JSON (export/inspector.py)
AuthFailure = Callable[[str], None]  # called with the reason (token | tls)

log = logging.getLogger(__name__)

CONTENT_PATHS = ("/worst", "/traces/{trace_id}")  # paths that serve trace content


class MetricsServer:
    def __init__(self, registry: CollectorRegistry, host: str, port: int, *,
                 readiness: ReadinessProbe, worst: WorstProvider,
                 ssl_context: ssl.SSLContext | None = None, bearer_token: str | None = None,
                 allow_unauthenticated_content: bool = False,
                 on_auth_failure: AuthFailure | None = None, inspect: TraceLookup | None = None) -> None:
        self._registry = registry
        self._host = host
        self._port = port
        self._readiness = readiness
        self._worst = worst
        self._inspect = inspect
        self._ssl = ssl_context
        self._token = BearerToken(bearer_token) if bearer_token else None
        self._content_open = allow_unauthenticated_content or is_loopback(host)
        self._on_auth_failure = on_auth_failure
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._scraped = asyncio.Event()
        self._next_scrape = 0  # sequence number of the next /metrics request
        self._latest_scrape = -1  # highest sequence number among the scrapes served

    @property
    def port(self) -> int:
        if self._site is None or self._site._server is None:
            return self._port
        sockets = getattr(self._site._server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else self._port

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/worst", self._worst_handler)
        if self._inspect is not None:  # off with --trace-inspector false: 404 like any unknown path
            app.router.add_get("/traces/{trace_id}", self._trace_handler)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, self._host, self._port, ssl_context=self._ssl)
        try:
            await self._site.start()
        except OSError as exc:  # port in use, address not local, no permission: a setting is wrong
            await self._runner.cleanup()
            self._runner = None
            self._site = None
            raise ConfigError(
                "--metrics-host/--metrics-port (RAGMON_METRICS_HOST/RAGMON_METRICS_PORT)",
                f"cannot listen on {self._host}:{self._port}: {exc.strerror or exc}",
            ) from exc

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            self._site = None

    async def _metrics(self, request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        seq = self._next_scrape
        self._next_scrape += 1
        try:
            body = await asyncio.to_thread(encoder, self._registry)
        except Exception:  # answer 500 but keep the server (and this log) alive
            log.exception("rendering /metrics failed")
            return web.Response(status=500, text="could not render metrics\n")
        self._latest_scrape = max(self._latest_scrape, seq)
        self._scraped.set()
        return web.Response(body=body, headers={"Content-Type": content_type})

    def scrape_mark(self) -> int:
        """A mark: ``wait_for_scrape(mark)`` waits for a scrape that starts after this call."""
        return self._next_scrape

    async def wait_for_scrape(self, mark: int, timeout_s: float) -> bool:
        """Wait (bounded) until a /metrics request that started after ``mark`` was served."""
        try:
            async with asyncio.timeout(timeout_s):
                while self._latest_scrape < mark:
                    self._scraped.clear()
                    await self._scraped.wait()
        except TimeoutError:
            return False
        return True

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "alive"})

    async def _readyz(self, request: web.Request) -> web.Response:
        ready, detail = self._readiness()
        return web.json_response({"ready": ready, **detail}, status=200 if ready else 503,
                                 dumps=lambda o: json.dumps(o, default=str))

    async def _worst_handler(self, request: web.Request) -> web.Response:
        refused = self._guard_content(request)
        if refused is not None:
            return refused
        return web.json_response({"worst": self._worst()})

    async def _trace_handler(self, request: web.Request) -> web.Response:
        refused = self._guard_content(request)
        if refused is not None:
            return refused
        assert self._inspect is not None
        trace_id = request.match_info["trace_id"]
        entry = self._inspect(trace_id)
        if entry is None:
            return web.json_response(
                {"error": f"trace {trace_id[:64]!r} is not among the recently judged traces "
                          "(only judged traces are kept, a bounded number: --trace-inspector-size)"}, status=404)
        return web.json_response(entry)

    def _guard_content(self, request: web.Request) -> web.Response | None:
        if self._token is not None:
            if self._token.accepts(request.headers.get(hdrs.AUTHORIZATION)):
                return None
            if self._on_auth_failure is not None:
                self._on_auth_failure("token")
            return web.json_response({"error": "missing or wrong bearer token"}, status=401,
                                     headers={hdrs.WWW_AUTHENTICATE: 'Bearer realm="ragmon"'})
        if self._content_open:
            return None
        return web.json_response(
            {"error": f"{request.path} serves trace content: set a bearer token (RAGMON_METRICS_BEARER_TOKEN) "
                      "or listen on loopback; see docs/security.md"}, status=403)
