"""Prometheus metric definitions and the HTTP server for /metrics, /healthz, /readyz, /worst."""
