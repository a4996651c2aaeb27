"""The agent's HTTP face on the metrics port: /metrics, /healthz, /readyz, /worst.

/metrics negotiates the exposition format: OpenMetrics (which carries the trace-id
exemplars on score histograms) when the scraper asks for it, as Prometheus does, else the
classic text format.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

ReadinessProbe = Callable[[], tuple[bool, dict[str, Any]]]
WorstProvider = Callable[[], list[dict[str, Any]]]


class MetricsServer:
    def __init__(self, registry: CollectorRegistry, host: str, port: int, *,
                 readiness: ReadinessProbe, worst: WorstProvider) -> None:
        self._registry = registry
        self._host = host
        self._port = port
        self._readiness = readiness
        self._worst = worst
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None

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
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, self._host, self._port)
        await self._site.start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            self._site = None

    async def _metrics(self, request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = encoder(self._registry)
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "alive"})

    async def _readyz(self, request: web.Request) -> web.Response:
        ready, detail = self._readiness()
        return web.json_response({"ready": ready, **detail}, status=200 if ready else 503,
                                 dumps=lambda o: json.dumps(o, default=str))

    async def _worst_handler(self, request: web.Request) -> web.Response:
        return web.json_response({"worst": self._worst()})
