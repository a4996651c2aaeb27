"""The one place a judge is built — for the agent, ``ragmon eval``, ``ragmon calibrate`` and
``ragmon inspect`` alike — from ``JudgeSettings``, the judge's section of the settings table.

The agent takes the section from its ``AgentConfig`` (``config.section(JudgeSettings)``); the
commands read it straight from the table (``judge_settings``: explicit arguments > ``RAGMON_JUDGE*``
> the table's defaults) without building a whole agent configuration. Each judge then gets only
its own settings.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import judges
from ..config import load_section
from ..config_checks import check_judge_endpoint
from .judge import Criterion, Judge, JudgeMetrics

if TYPE_CHECKING:
    from .llm import LlmJudgeSettings

_PREFIX = "judge_"


@dataclass(frozen=True, slots=True)
class JudgeSettings:
    """The ``judge`` / ``judge_*`` settings a judge is built from (defaults: the settings table's)."""

    judge: str
    judge_concurrency: int
    judge_timeout_s: float
    judge_base_url: str | None
    judge_model: str | None
    judge_api_key: str | None = field(repr=False)  # never shown
    judge_mode: str
    judge_max_retries: int
    judge_requests_per_minute: int
    judge_tokens_per_minute: int
    judge_budget_tokens_per_minute: int
    judge_budget_tokens_per_day: int
    judge_cache_ttl_s: float
    judge_cache_size: int
    judge_max_input_tokens: int
    judge_max_completion_tokens: int
    judge_circuit_failures: int
    judge_circuit_reset_s: float
    judge_embedding_model: str | None
    judge_model_path: str | None
    judge_model_sha256: str | None
    judge_int8: bool
    judge_profile: str | None

    def __post_init__(self) -> None:
        check_judge_endpoint(self.judge, self.judge_base_url, self.judge_model)


def judge_settings(overrides: Mapping[str, Any] | None = None,
                   environ: Mapping[str, str] | None = None) -> JudgeSettings:
    """The judge's section from explicit ``overrides`` (None values ignored) > ``RAGMON_JUDGE*`` > defaults."""
    return load_section(JudgeSettings, overrides, environ)


def build_judge(settings: JudgeSettings, metrics: JudgeMetrics | None = None,
                criteria: Sequence[Criterion] = ()) -> Judge:
    """The judge ``settings.judge`` names in the registry (``ragmon.judges``), built by its own
    builder (imported here, so only the judge actually used pays its imports); ``criteria``: the
    user-declared llm evaluators, for a judge that declares ``judges_criteria``."""
    spec = judges.spec(settings.judge)
    module, _, function = spec.builder.partition(":")
    builder = getattr(importlib.import_module(module), function)
    judge: Judge = builder(settings, metrics, criteria if spec.judges_criteria else ())
    return judge


def build_local(settings: JudgeSettings, metrics: JudgeMetrics | None, criteria: Sequence[Criterion]) -> Judge:
    """The offline judge (``judges`` entry ``local``)."""
    from .local import LocalJudge  # heavy imports only for the judge actually used

    return LocalJudge(settings.judge_model_path, settings.judge_model_sha256,
                      profile=settings.judge_profile, int8=settings.judge_int8)


def build_llm(settings: JudgeSettings, metrics: JudgeMetrics | None, criteria: Sequence[Criterion]) -> Judge:
    """The OpenAI-compatible LLM judge (``judges`` entry ``llm``)."""
    from .llm import LlmJudge

    return LlmJudge(llm_settings(settings), metrics=metrics, criteria=criteria)


def add_judge_argument(parser: argparse.ArgumentParser, *, default: str = "local", allow_none: bool = False,
                       endpoint: bool = True, help: str = "the judge") -> None:
    """``--judge`` with its choices from the registry (plus ``none`` where a command can do without;
    without ``endpoint``, only judges that need no endpoint)."""
    choices = [n for n in judges.names() if endpoint or not judges.spec(n).needs_endpoint]
    parser.add_argument("--judge", choices=[*choices, *(["none"] if allow_none else [])], default=default,
                        help=f"{help} (default: {default}; {judges.summary_line()})")


def llm_settings(settings: JudgeSettings) -> LlmJudgeSettings:
    """The LLM judge's settings from the ``judge_*`` ones (its tuning knobs the table does not
    expose, such as the backoff, keep their own defaults)."""
    from .llm import LlmJudgeSettings

    known = {f.name for f in dataclasses.fields(JudgeSettings)}
    values = {f.name: getattr(settings, _PREFIX + f.name) for f in dataclasses.fields(LlmJudgeSettings)
              if _PREFIX + f.name in known}
    return LlmJudgeSettings(**values)
