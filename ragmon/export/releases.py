"""``ragmon_release_info``: which release (app version, prompt version, model) served each pipeline.

A drop is easiest to explain next to the release that caused it, so the agent exports one series
per release it sees on RAG traces, value 1, and the dashboard draws an annotation when a new one
appears. The values are user data: each is cut to ``MAX_VALUE_CHARS`` and cleaned, and at most
``limit`` distinct releases become series; later ones become a single ``_other`` release.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from prometheus_client import Gauge

from .. import semconv as sc
from .metrics import clean_label_value

MAX_VALUE_CHARS = 64


def _value(raw: Any) -> str:
    if raw is None or raw == "":
        return sc.UNKNOWN_LABEL
    return clean_label_value(str(raw)[:MAX_VALUE_CHARS])


class ReleaseTracker:
    """Sets ``ragmon_release_info{service, pipeline, app_version, prompt_version, model} = 1``."""

    def __init__(self, gauge: Gauge, limit: int) -> None:
        self._gauge = gauge
        self._limit = limit
        self._seen: set[tuple[str, str, str, str, str]] = set()
        self._app_versions: dict[str, str] = {}  # service label -> latest service.version seen
        self._labels: dict[str, str] = {}  # model / prompt version -> its label value (see _label)
        self._lock = threading.Lock()

    def note_resource(self, service: str, resource: Mapping[str, Any]) -> None:
        """Remember the app version a span's resource carries (``service.version``)."""
        version = resource.get(sc.SERVICE_VERSION)
        if version is None:
            return
        known = service in self._app_versions
        if known or len(self._app_versions) < 4 * self._limit:  # bounded: service names are user data
            self._app_versions[service] = _value(version)

    def observe(self, service_label: str, service: str | None, pipeline_label: str,
                attributes: Mapping[str, Any]) -> None:
        """A RAG trace of (service, pipeline) with its extracted attributes (model, prompt version)."""
        self.observe_values(service_label, service, pipeline_label, attributes.get(sc.LLM_PROMPT_TEMPLATE_VERSION),
                            attributes.get(sc.LLM_MODEL_NAME))

    def observe_values(self, service_label: str, service: str | None, pipeline_label: str, prompt_version: Any,
                       model: Any) -> None:
        """``observe`` with the trace's prompt version and model as they are."""
        app = self._app_versions.get(service or sc.UNKNOWN_LABEL, sc.UNKNOWN_LABEL)
        prompt = self._label(prompt_version)
        model_label = self._label(model)
        if app == prompt == model_label == sc.UNKNOWN_LABEL:
            return  # nothing to say about this release
        key = (service_label, pipeline_label, app, prompt, model_label)
        if key in self._seen:
            return
        with self._lock:
            if key in self._seen:
                return
            if len(self._seen) >= self._limit:
                key = (service_label, pipeline_label, sc.OVERFLOW_LABEL, sc.OVERFLOW_LABEL, sc.OVERFLOW_LABEL)
            self._seen.add(key)
        self._gauge.labels(*key).set(1)

    def _label(self, raw: Any) -> str:
        """``_value(raw)``; a string's is remembered (every trace repeats the same few models and
        prompt versions, and cleaning one costs more than the lookup). Bounded: values are user data."""
        if raw is None:
            return sc.UNKNOWN_LABEL
        if type(raw) is not str:
            return _value(raw)
        label = self._labels.get(raw)
        if label is None:
            label = _value(raw)
            if len(self._labels) < 4 * self._limit:
                self._labels[raw] = label
        return label
