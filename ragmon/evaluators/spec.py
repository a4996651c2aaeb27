"""One declared evaluator (pure data; validated by ``loader``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

KIND_LLM: Final = "llm"
KIND_REGEX: Final = "regex"
KIND_HEURISTIC: Final = "heuristic"
KIND_JSON_SCHEMA: Final = "json_schema"
KINDS: Final = (KIND_LLM, KIND_REGEX, KIND_HEURISTIC, KIND_JSON_SCHEMA)

# what a regex looks at
TARGETS: Final = ("answer", "contexts", "question", "answer_and_contexts")
# heuristic checks
HEURISTICS: Final = ("length", "language", "refusal", "citation")
# how diagnosis uses a failing evaluator (the metric table's roles; "" = reported only)
ROLES: Final = ("", "retrieval", "grounding", "answer")

MAX_EVALUATORS: Final = 16  # each adds series per (service, pipeline): bounded on purpose
NAME_PATTERN: Final = re.compile(r"[a-z][a-z0-9_]{0,39}")


@dataclass(frozen=True, slots=True)
class EvaluatorSpec:
    """A user-declared check.

    ``pass_when`` says which outcome passes: for ``regex`` ``no_match`` (a secret must not appear) or
    ``match`` (a disclaimer must); for ``llm`` ``yes`` or ``no`` (the criterion's answer); for
    ``heuristic`` and ``json_schema`` the check itself (always ``ok``). ``threshold`` is the share of
    passing answers below which the hour is alerted on and ``ragmon eval``'s gate fails by default.
    """

    name: str
    kind: str
    line: int  # where it was declared (error messages)
    description: str = ""
    pass_when: str = "ok"
    threshold: float = 0.95
    role: str = ""
    buckets: bool = False  # export histogram buckets (default: sum and count only)
    # kind-specific
    pattern: str | None = None
    target: str = "answer"
    ignore_case: bool = False
    criterion: str | None = None
    check: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    schema: dict[str, Any] | None = None

    @property
    def title(self) -> str:
        return self.name.replace("_", " ")

    @property
    def alert(self) -> str:
        """CamelCase stem of its alert name (``no_pii`` -> ``RagmonEvaluatorNoPii``)."""
        return "Evaluator" + "".join(part.capitalize() for part in self.name.split("_"))
