"""``ragmon demo``: the embedded default — agent, a small RAG app, injected failures, a live summary.

No Kafka, no API key, no internet: the agent runs in this process with the offline local
judge, and the app (``ragmon.demo.app.DemoRag``, a support bot over a bundled knowledge base)
sends its traces to it through ragmon's own SDK.

``ragmon demo eval`` is the offline half: ``ragmon eval`` over the bundled golden set, first
for the bot as released, then for a broken release, showing the gate passing the first and
failing the second.

==============  ==========================================================================
corpus          the bundled knowledge base (``corpus.json``) and its questions
retriever       BM25 over the corpus; the off-topic search of a retrieval miss
generator       the deterministic template answer; ``text``: tokens and sentences
failures        the injected failures and the pure functions that make them
app             ``DemoRag``: the support bot, decorated with ragmon's SDK
runner          ``ragmon demo``: agent + traffic + summary; ``tracker``, ``counts``, ``summary``
separation      offline per-kind judge scores (``python -m ragmon.demo.separation``)
releases        the bot as released and as a broken release, ``ragmon eval --app`` entry points
offline         ``ragmon demo eval``; its golden set is ``golden.jsonl``
command         the command's flags (``add_arguments``) and ``run``
==============  ==========================================================================

Pieces others can reuse: ``ragmon.demo.app.DemoRag`` (one request with a chosen injected
failure), ``ragmon.demo.failures`` (what each failure does), ``ragmon.demo.separation``.
"""
