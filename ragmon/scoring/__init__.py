"""Judges and what they compute. httpx never leaves ``llm/``.

- ``judge``     the ``Judge`` / ``EvalJudge`` Protocols, ``JudgeMetrics``, ``EvalRequest``
- ``factory``   the one place a judge is built from settings (judge names: ``ragmon.judges``)
- ``onnx_runner`` the one way a model file is loaded and run (verified sha256, session, batches)
- ``identity``  what a judge judges with (judge, version, fitted profile): ``ragmon_judge_info``
- ``text``      sentences, words, stems and stop words, read the same way by every judge and metric
- ``claim_verdicts`` the per-claim verdict shape both judges explain with (supported / contradicted /
                unsupported, evidence, reason)
- ``local/``    the offline local judge: MiniLM embedder (int8 kernels), claims, evidence, model
                and its fitted coefficients, profiles
- ``reader/``   ragmon's own trained claim reader (supported / unsupported / contradicted): training
                recipe, data manifest, int8 ONNX and its model card; the local judge reads claims with it
- ``llm/``      the LLM judge: HTTP transport, prompts, verdict parsing, compact and parity modes,
                resilience (circuit breaker, rate limits, Retry-After; delays: ``ragmon.backoff``), token
                budget, cache
- ``metrics/``  metric formulas, citations, abstention and diagnosis

Sampling (which traces get judged) is ``ragmon.sampling``.
"""
