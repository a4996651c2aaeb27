"""Build the configured judge from ``AgentConfig``."""

from __future__ import annotations

from ..config import AgentConfig
from ..export.metrics import AgentMetrics
from .judge import Judge


def build_judge(config: AgentConfig, metrics: AgentMetrics | None = None) -> Judge:
    """``--judge local`` -> the offline model; ``--judge llm`` -> the OpenAI-compatible LLM judge."""
    if config.judge == "local":
        from .local import LocalJudge  # heavy imports only for the judge actually used

        judge: Judge = LocalJudge(config.judge_model_path, config.judge_model_sha256)
        return judge
    if config.judge == "llm":
        from .llm import LlmJudge

        assert config.judge_base_url and config.judge_model  # load_agent_config validated both
        return LlmJudge(
            base_url=config.judge_base_url,
            model=config.judge_model,
            api_key=config.judge_api_key,
            mode=config.judge_mode,
            metrics=metrics,
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
    raise ValueError(f"unknown judge {config.judge!r}")
