"""The LLM judge: RAGAS metrics from any OpenAI-compatible chat API (httpx stays in here).

Two modes share prompts, parsing and formulas:

* ``compact`` (default): ONE chat call per trace returns the answer's claims with verdicts,
  a relevance verdict per context and a few generated questions; answer relevancy then
  comes from the agent's embedding model, so it costs no further LLM call.
* ``parity``: RAGAS's own recipe — statement extraction, then NLI verdicts; N question
  generations; one call per context — for numbers comparable with RAGAS.

Offline evaluation (``score_for_eval``, the ``EvalJudge`` protocol) adds context recall, answer
correctness, abstention and citation metrics: in compact mode still ONE chat call, with a
separate evaluation variant of the compact prompt (``prompts.compact_eval_messages``; the online
prompt is untouched); in parity mode RAGAS's extra calls.

Cost and failure control, in the order a trace meets them: content-hash cache -> token
budget (``JudgeBudgetExceeded``: the agent skips the trace) -> input cut to the per-trace
token budget -> per request: circuit breaker (opened only by a server that is down) ->
client-side rpm/tpm limiter -> a free request slot (adaptive concurrency: AIMD on the server's
latency, timeouts and 429/503/504; waiting for it is not part of the request's timeout) -> HTTP
with retries (exponential backoff + jitter, ``Retry-After`` honoured) on 429/5xx/timeouts/connection
errors -> ``response_format`` json_schema, falling back to json_object and then plain text when the
server rejects it -> tolerant parsing -> one repair attempt -> contradictions kept only when their
evidence quotes a context (``evidence``).

Every request is counted in ``ragmon_judge_requests_total{judge="llm",outcome}`` with one of
ok, retry (a failed attempt that will be retried), timeout, connect_error, http_error,
rate_limited, invalid_reply, reply_truncated (unusable and cut off at max_tokens), circuit_open.
The API key is sent as a header and never logged or put in an error message.

Modules. Private (this package's API is ``__all__``): ``_settings`` the frozen settings, ``_http``
the resilient POST, ``_chat`` chat/embeddings protocol and token usage, ``_calls`` what a mode may
call, ``_compact`` / ``_parity`` the modes, ``_eval`` the offline metrics, ``_judge`` the
``LlmJudge`` facade (cache, budget, input cutting). Public helpers: ``prompts`` the prompt texts
and their fenced payloads, ``verdicts`` tolerant parsing of the replies, ``evidence`` the check that a contradiction's
evidence quotes a context, ``resilience`` circuit
breaker, rate limiter and ``Retry-After`` (the delays are ``ragmon.backoff``), ``budget`` the
token budget, ``cache`` the content-hash cache. ``ChatClient``, ``JudgeHttp`` and ``Usage`` are
exported for the other LLM callers in ragmon (``ragmon dataset synth``).
"""

from __future__ import annotations

from ._calls import SupportsEmbed
from ._chat import FORMAT_JSON_OBJECT, FORMAT_JSON_SCHEMA, FORMAT_NONE, ChatClient, Usage
from ._http import JudgeHttp
from ._judge import LlmJudge
from ._settings import MODES, LlmJudgeSettings

__all__ = [
    "FORMAT_JSON_OBJECT",
    "FORMAT_JSON_SCHEMA",
    "FORMAT_NONE",
    "MODES",
    "ChatClient",
    "JudgeHttp",
    "LlmJudge",
    "LlmJudgeSettings",
    "SupportsEmbed",
    "Usage",
]
