"""The LLM judge's settings: one frozen value, built from ``JudgeSettings`` by ``scoring.factory``
(the judge never sees the agent's whole configuration)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

NAME: Final = "llm"  # the judge's bounded ``judge`` label value
MODES: Final = ("compact", "parity")


@dataclass(frozen=True, slots=True)
class LlmJudgeSettings:
    """Endpoint, mode and cost/failure limits of one ``LlmJudge`` (0 disables a limit)."""

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)  # never shown
    mode: str = "compact"
    embedding_model: str | None = None  # None: answer relevancy embeds locally (MiniLM)
    # per request: timeout and retries (exponential backoff + jitter, Retry-After honoured)
    timeout_s: float = 60.0
    max_retries: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    # client-side rate limits (per request) and token budget (per trace: skipped when spent)
    requests_per_minute: int = 0
    tokens_per_minute: int = 0
    budget_tokens_per_minute: int = 0
    budget_tokens_per_day: int = 0
    # content-hash cache of whole verdicts
    cache_ttl_s: float = 3600.0
    cache_size: int = 10_000
    # prompt size, reply size
    max_input_tokens: int = 6_000
    max_completion_tokens: int = 1_024
    # circuit breaker and concurrency bound
    circuit_failures: int = 5
    circuit_reset_s: float = 30.0
    concurrency: int = 4
    # parity mode: RAGAS's N generated questions
    parity_questions: int = 3
    temperature: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
