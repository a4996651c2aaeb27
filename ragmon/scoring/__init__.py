"""Judges and what they compute. httpx never leaves ``llm/``.

- ``judge``     the ``Judge`` / ``EvalJudge`` Protocols, ``JudgeMetrics``, ``EvalRequest``
- ``factory``   the one place a judge is built from settings
- ``identity``  what a judge judges with (judge, version, fitted profile): ``ragmon_judge_info``
- ``text``      sentences, words, stems and stop words, read the same way by every judge and metric
- ``claim_verdicts`` the per-claim verdict shape both judges explain with (supported / contradicted /
                unsupported, evidence, reason)
- ``local/``    the offline local judge: MiniLM embedder (int8 kernels), claims, evidence, model
                and its fitted coefficients, profiles
- ``llm/``      the LLM judge: HTTP transport, prompts, verdict parsing, compact and parity modes,
                resilience (circuit breaker, rate limits, Retry-After; delays: ``ragmon.backoff``), token
                budget, cache
- ``metrics/``  metric formulas, citations, abstention and diagnosis

Sampling (which traces get judged) is ``ragmon.sampling``.
"""
