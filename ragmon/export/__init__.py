"""What the agent shows: Prometheus metrics, the HTTP server, and the judged-trace file.

- ``metrics``    every Prometheus metric the agent exports, on an injected registry
- ``latency``    exact P95 latency over a sliding window per (service, pipeline), for the gauge
- ``releases``   ``ragmon_release_info``: which release (app, prompt, model) served each pipeline
- ``worst``      the worst recently judged traces, for ``/worst``
- ``inspector``  recently judged traces as extracted, for ``/traces/{trace_id}``
- ``server``     the HTTP server: ``/metrics``, ``/healthz``, ``/readyz``, ``/worst``, ``/traces/{id}``
- ``judged``     the bounded, rotating JSONL file of judged traces (``--export-judged``) that
                 ``ragmon dataset harvest`` reads
"""
