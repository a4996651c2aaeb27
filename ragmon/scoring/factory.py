"""Build the configured judge from ``AgentConfig``: the one scoring module that reads the agent's
configuration; each judge gets only its own settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config import AgentConfig
from .judge import Judge, JudgeMetrics

if TYPE_CHECKING:
    from .llm import LlmJudgeSettings


def build_judge(config: AgentConfig, metrics: JudgeMetrics | None = None) -> Judge:
    """``--judge local`` -> the offline model; ``--judge llm`` -> the OpenAI-compatible LLM judge."""
    if config.judge == "local":
        from .local import LocalJudge  # heavy imports only for the judge actually used

        judge: Judge = LocalJudge(config.judge_model_path, config.judge_model_sha256, profile=config.judge_profile,
                   int8=config.judge_int8)
        return judge
    if config.judge == "llm":
        from .llm import LlmJudge

        return LlmJudge(llm_settings(config), metrics=metrics)
    raise ValueError(f"unknown judge {config.judge!r}")


def llm_settings(config: AgentConfig) -> LlmJudgeSettings:
    """The LLM judge's settings from the ``RAGMON_JUDGE_*`` ones (the rest keep their defaults)."""
    from .llm import LlmJudgeSettings

    assert config.judge_base_url and config.judge_model  # load_agent_config validated both
    return config.section(LlmJudgeSettings, prefix="judge_")
