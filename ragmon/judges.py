"""The judge registry: every judge ragmon can build, by name, with what it declares — the metric
rows it computes, whether it needs an endpoint, whether it judges ``llm`` evaluators — and where
its builder lives (imported only when that judge is built, so the registry stays light).

Everything that names judges reads it: the settings table's ``--judge`` / ``RAGMON_JUDGE`` (and
the README table generated from it), the ``--judge`` choices of ``ragmon eval``, ``calibrate``,
``alerts simulate`` and ``inspect``, the endpoint and evaluator checks, and the factory
(``scoring.factory.build_judge``). Adding a judge: its module with a builder
``build(settings, metrics, criteria) -> Judge``, one ``JudgeSpec`` here (or ``register`` at run
time, e.g. from a plugin), its test and its docs row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import quality


@dataclass(frozen=True, slots=True)
class JudgeSpec:
    name: str  # the bounded ``judge`` label value
    builder: str  # "package.module:function", called with (JudgeSettings, JudgeMetrics | None, criteria)
    summary: str  # one line for --help and the README
    # the metric-table rows its scores may hold on live traffic (default: the table's online rows)
    metrics: tuple[str, ...] = field(default_factory=quality.online_names)
    needs_endpoint: bool = False  # an OpenAI-compatible base URL and model are required
    judges_criteria: bool = False  # it can judge user-declared ``llm`` evaluators in its call


_JUDGES: dict[str, JudgeSpec] = {}


def register(spec: JudgeSpec) -> JudgeSpec:
    """Add (or replace) a judge; the name must be a bounded label value."""
    if not spec.name or not spec.name.replace("_", "").isalnum() or spec.name != spec.name.lower():
        raise ValueError(f"judge name {spec.name!r} must be lower-case letters, digits and _")
    if spec.name == "none":
        raise ValueError("'none' means no judge in the commands that allow it")
    _JUDGES[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    _JUDGES.pop(name, None)


def names() -> tuple[str, ...]:
    """Registered judge names, the default first."""
    return tuple(_JUDGES)


def spec(name: str) -> JudgeSpec:
    try:
        return _JUDGES[name]
    except KeyError:
        raise ValueError(f"unknown judge {name!r}; known: {', '.join(_JUDGES)}") from None


def summary_line() -> str:
    return "; ".join(f"{s.name}: {s.summary}" for s in _JUDGES.values())


register(JudgeSpec("local", "ragmon.scoring.factory:build_local", "offline local model (MiniLM, trained reader)"))
register(JudgeSpec("llm", "ragmon.scoring.factory:build_llm", "an LLM over an OpenAI-compatible API",
                   needs_endpoint=True, judges_criteria=True))
