"""Offline evaluation against a golden set: ``ragmon eval`` (see docs/evaluation.md).

Reads ``ingest/`` (the agent's decoder and extraction) and ``scoring/`` (the agent's judges), so
offline and online numbers mean the same thing. The modules, in data-flow order:

==================  ==========================================================================
goldenset           the eval set: JSONL rows -> ``GoldenRow`` (bad rows -> ``RowProblem``)
app_runner,capture  call the user's app in-process, capture its spans, build ``RagTrace``s
responses           ... or read recorded responses (``--responses``)
traces_file         ... or OTLP/JSON traces as the Collector's file exporter writes them
doc_ids             retrieved document ids, with ``--doc-id-field`` mapping
ir                  hit/recall/precision@k, AP, MRR, nDCG@k, two-hop recall, hop-miss classes (the one
                    set of IR functions; ``ragmon calibrate`` uses them too)
row_scoring         one row's metrics: IR + the judge's scores + composite + verdict
stats               bootstrap intervals, paired bootstrap deltas (the one bootstrap)
gate                ``--fail-if`` rules, defaults, significance
report              the JSON report (aggregates, breakdowns, baseline deltas, gate)
run                 one whole run without the CLI (shared by ``command`` and ``ragmon.testing``)
command             the ``ragmon eval`` command line and exit codes
inspect_command     ``ragmon inspect FILE``: what the agent extracts from a traces file, optionally judged
terminal, markdown, junit, history, pushgateway   the outputs
==================  ==========================================================================
"""
