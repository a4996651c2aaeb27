"""A fresh ragmon SDK / OpenTelemetry global state per test (as ``tests/sdk/conftest.py`` does)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.util._once import Once

import ragmon
from ragmon.sdk import _runtime, setup


@contextmanager
def fresh_sdk() -> Iterator[None]:
    """No global provider, no ragmon state inside; whatever was there is put back afterwards."""
    saved_global = (trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE)
    saved_state = (setup.STATE.owned_provider, setup.STATE.owned_is_global)
    ragmon.shutdown()
    trace._TRACER_PROVIDER = None
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    setup.STATE.owned_provider, setup.STATE.owned_is_global = None, False
    _runtime.RUNTIME.reset()
    try:
        yield
    finally:
        ragmon.shutdown()
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved_global
        setup.STATE.owned_provider, setup.STATE.owned_is_global = saved_state
        _runtime.RUNTIME.reset()
