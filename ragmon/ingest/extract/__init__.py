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

Documents without an id take one from their metadata (``id``, ``doc_id``, ...), else a content
hash (``ragmon.doc_ids.content_id``: the same rule as ragmon's SDK). GenAI retrieval spans
may carry ids and scores only; then texts are looked up in the chat span's input messages
(matched by id in structured tool results, or by position when the counts agree). When that is
not possible the documents stay without text — documented, not guessed.

Modules (private; this package's API is ``build_rag_trace`` and ``content_id``):
``_values`` forgiving converters, ``_text`` question/answer text, ``_documents`` document
readers, ``_messages`` chat-message readers, ``_view`` the span tree and roles, ``_trace`` the
builder.
"""

from __future__ import annotations

from ...doc_ids import content_id
from ._trace import build_rag_trace

__all__ = ["build_rag_trace", "content_id"]
