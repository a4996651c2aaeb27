"""What the extraction can be told: how pipelines are named, which metadata keys name a document.

The field names are the agent's setting names (``AgentConfig.section(ExtractSettings)``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from ...doc_ids import METADATA_ID_KEYS

MAX_RENAME_CACHE = 4096  # distinct raw pipeline names remembered with their renamed value


@dataclass(frozen=True)
class ExtractSettings:
    """``pipeline_attribute``: a span attribute that names the pipeline when neither
    ``ragmon.pipeline`` nor ``gen_ai.workflow.name`` does. ``pipeline_rename``: ``REGEX -> NAME``
    rules tried in order on the whole pipeline name (``re.fullmatch``, as Prometheus relabelling
    anchors its regexes); the first match wins and ``NAME`` may use ``\\1`` groups.
    ``doc_id_keys``: metadata keys that name a document (see :mod:`ragmon.doc_ids`)."""

    pipeline_attribute: str | None = None
    pipeline_rename: Mapping[str, str] = field(default_factory=dict)
    doc_id_keys: tuple[str, ...] = METADATA_ID_KEYS

    @cached_property
    def _rules(self) -> tuple[tuple[re.Pattern[str], str], ...]:
        return tuple((re.compile(pattern), name) for pattern, name in self.pipeline_rename.items())

    @cached_property
    def _renamed(self) -> dict[str, str]:
        return {}

    def rename_pipeline(self, name: str) -> str:
        """The first matching rule's name for ``name``, else ``name`` itself."""
        if not self.pipeline_rename:
            return name
        cached = self._renamed.get(name)
        if cached is not None:
            return cached
        renamed = name
        for pattern, template in self._rules:
            match = pattern.fullmatch(name)
            if match is not None:
                try:
                    renamed = match.expand(template) or name
                except (re.error, IndexError):
                    renamed = template
                break
        if len(self._renamed) < MAX_RENAME_CACHE:
            self._renamed[name] = renamed
        return renamed


DEFAULT_SETTINGS = ExtractSettings()
