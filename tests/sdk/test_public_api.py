"""The public facade: an explicit, sorted ``__all__`` whose every name imports."""

from __future__ import annotations

import importlib

import ragmon


def test_all_is_sorted_and_unique() -> None:
    assert ragmon.__all__ == sorted(ragmon.__all__)
    assert len(set(ragmon.__all__)) == len(ragmon.__all__)


def test_every_public_name_imports() -> None:
    module = importlib.import_module("ragmon")
    for name in ragmon.__all__:
        assert getattr(module, name) is not None, name
    namespace: dict[str, object] = {}
    exec("from ragmon import *", namespace)
    assert set(ragmon.__all__) <= set(namespace)


def test_sdk_names_are_the_sdk_objects() -> None:
    from ragmon.sdk import decorators, manual, setup, spans

    assert (ragmon.pipeline, ragmon.retriever, ragmon.generator) == (
        decorators.pipeline, decorators.retriever, decorators.generator)
    assert (ragmon.span, ragmon.record_feedback) == (manual.span, manual.record_feedback)
    assert (ragmon.init, ragmon.shutdown) == (setup.init, setup.shutdown)
    assert ragmon.RagSpan is spans.RagSpan


def test_importing_the_sdk_does_not_import_the_agent() -> None:
    import subprocess
    import sys

    code = ("import sys, ragmon; heavy = [m for m in ('numpy', 'onnxruntime', 'aiohttp', 'aiokafka', "
            "'prometheus_client', 'ragmon.agent') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
