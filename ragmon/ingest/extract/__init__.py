"""The spans of one trace -> one ``RagTrace``. Pure and forgiving: odd attribute types are
ignored or converted, never raised on.

Conventions read (names in ``semconv``): ragmon's own ``ragmon.*`` (its SDK writes
OpenInference), OpenInference, OTel GenAI, and OpenLLMetry/Traceloop.

How the stages are found
    Each span gets at most one *role*: pipeline, retriever, reranker or generator
    (``ragmon.stage`` wins, then ``openinference.span.kind``, then ``gen_ai.operation.name``,
    then OpenLLMetry's ``llm.request.type``, then ``db.query.result`` events, then the data
    keys themselves — the SDK's attribute limit evicts the *oldest* attributes, often the
    span kind, while ``retrieval.documents.*`` survive). Framework instrumentors nest spans
    of one role (a RETRIEVER inside a RETRIEVER, an LLM inside an LLM), so spans of a role
    are grouped under their outermost same-role ancestor and each *group* counts once:

    * latency comes from the group's outermost span (it covers the whole operation as the
      application sees it; an inner span is a part of it);
    * data (documents, answer) comes from the group member that holds the most of it,
      whichever depth that is. Nothing is counted twice.

Retrieval: documents of all retriever groups in start order (ids de-duplicated); when a
reranker returned documents those are what the generator saw, so they replace the list.
Retrieval latency is the envelope (first start to last end) of the retriever and reranker
groups, i.e. it includes reranking and covers parallel (hybrid) retrievers once.

Generation: the last-ending generator group that produced text (an earlier LLM call is
typically query rewriting); its outermost span gives the latency.

Question: the pipeline span's input (``ragmon.stage=pipeline``, else the root — or the local
root, whose parent is in another process — else an OpenLLMetry workflow span or an outermost
CHAIN; nested CHAINs are framework plumbing and never used), else the retriever's query, else
the last user message sent to the generator. Answer: the pipeline span's output, else the generator's.
JSON-wrapped values (``{"question": ...}``, chat completion responses, LangChain
``generations``) are unwrapped.

Documents without an id of their own take one from their metadata (``id``, ``doc_id``, ...,
``source`` -> ``source#<hash8>``; keys configurable), else a content hash: the rule of
``ragmon.doc_ids``, shared with ragmon's SDK. GenAI retrieval spans may carry ids and scores
only; then texts are looked up in the generation span's input messages (by id in structured tool
results or in ``[doc-id] text`` lines, else by position when the counts agree), else the user
message minus the question becomes one context marked as such; the system instructions never
do. ``attributes["ragmon.contexts.source"]`` says which (``semconv.CONTEXTS_*``).

Only RAG requests: a trace with no retrieval, reranking, generation or ragmon pipeline span
(LlamaIndex index building, embedding batches, a late feedback span) is marked
``attributes["ragmon.not_rag"] = True``; the agent skips it as ``not_rag``.

Pipeline name: ``ragmon.pipeline`` -> ``gen_ai.workflow.name`` -> the configured attribute ->
``traceloop.workflow.name`` -> the root span's name, then the rename rules
(``ExtractSettings``).

Latency only: ``latency_trace`` gives the fields the agent records for a trace it does not
judge, with the same rules, from the few attributes that decide them and the mere presence of
content keys (``_latency``); None when content would decide them (the full extraction does).
What a reader makes of such a span is defined here too (``_span_view``: ``LightSpan``, and
``LatencyOnly``, which says which spans are read so and which of their keys), so that the readers
in ``ingest/decode/`` import this package and it imports none of them.

Modules (private; the package's API is the names below):

- ``_trace``         ``build_rag_trace``: spans -> ``RagTrace`` (the full extraction)
- ``_view``          the span tree and roles (``role_of``, ``declared_role``, ``key_role``)
- ``_documents``, ``_messages``, ``_text``, ``_values``  document, chat-message and text readers,
  forgiving converters
- ``_settings``      ``ExtractSettings``: what can be configured
- ``_span_view``     the span view of a trace read for latency only (``LightSpan``, ``SpanOrigin``),
  the key sets and plans a reader follows (``LatencyOnly``, ``KeyPlans``, ``latency_keys``)
- ``_latency``, ``_latency_docs``  ``latency_trace``: light spans -> ``LatencyTrace``
"""

from __future__ import annotations

from ...doc_ids import content_id
from ._latency import LatencyTrace, latency_trace
from ._settings import DEFAULT_SETTINGS, ExtractSettings
from ._span_view import (
    BOTH,
    CONTENT,
    CONTENT_KEYS,
    CONTENT_PREFIXES,
    DOC,
    DOCUMENT_LATENCY_SUFFIXES,
    DOCUMENT_PREFIXES,
    EMPTY_CONTENT,
    EMPTY_DOCS,
    LATENCY_KEYS,
    SKIP,
    SPAN_OVERHEAD,
    VALUE,
    DocFields,
    DocRef,
    KeyPlan,
    KeyPlans,
    LatencyOnly,
    LightSpan,
    SpanOrigin,
    file_content,
    file_value,
    latency_keys,
)
from ._trace import build_rag_trace
from ._view import declared_role, declared_role_of_dict, key_role, role_of

__all__ = [
    "BOTH",
    "CONTENT",
    "CONTENT_KEYS",
    "CONTENT_PREFIXES",
    "DEFAULT_SETTINGS",
    "DOC",
    "DOCUMENT_LATENCY_SUFFIXES",
    "DOCUMENT_PREFIXES",
    "EMPTY_CONTENT",
    "EMPTY_DOCS",
    "LATENCY_KEYS",
    "SKIP",
    "SPAN_OVERHEAD",
    "VALUE",
    "DocFields",
    "DocRef",
    "ExtractSettings",
    "KeyPlan",
    "KeyPlans",
    "LatencyOnly",
    "LatencyTrace",
    "LightSpan",
    "SpanOrigin",
    "build_rag_trace",
    "content_id",
    "declared_role",
    "declared_role_of_dict",
    "file_content",
    "file_value",
    "key_role",
    "latency_keys",
    "latency_trace",
    "role_of",
]
