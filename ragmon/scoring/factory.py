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

        judge: Judge = LocalJudge(config.judge_model_path, config.judge_model_sha256)
        return judge
    if config.judge == "llm":
        from .llm import LlmJudge

        return LlmJudge(llm_settings(config), metrics=metrics)
    raise ValueError(f"unknown judge {config.judge!r}")


def llm_settings(config: AgentConfig) -> LlmJudgeSettings:
    """The LLM judge's settings from the ``RAGMON_JUDGE_*`` ones (the rest keep their defaults)."""
    from .llm import LlmJudgeSettings

    assert config.judge_base_url and config.judge_model  # load_agent_config validated both
    return LlmJudgeSettings(
        base_url=config.judge_base_url,
        model=config.judge_model,
        api_key=config.judge_api_key,
        mode=config.judge_mode,
        embedding_model=config.judge_embedding_model,
        timeout_s=config.judge_timeout_s,
        max_retries=config.judge_max_retries,
        requests_per_minute=config.judge_requests_per_minute,
        tokens_per_minute=config.judge_tokens_per_minute,
        budget_tokens_per_minute=config.judge_budget_tokens_per_minute,
        budget_tokens_per_day=config.judge_budget_tokens_per_day,
        cache_ttl_s=config.judge_cache_ttl_s,
        cache_size=config.judge_cache_size,
        max_input_tokens=config.judge_max_input_tokens,
        circuit_failures=config.judge_circuit_failures,
        circuit_reset_s=config.judge_circuit_reset_s,
        concurrency=config.judge_concurrency,
    )
