"""The part of ragmon that runs inside the user's process.

Modules, each with one job:

* ``decorators``  ``@pipeline`` / ``@retriever`` / ``@generator`` for def, async def, methods, streams
* ``manual``      ``span(...)`` context manager, ``record_feedback``, ``current_span``, ``current_trace_id``
* ``spans``       ``RagSpan``: what one span records (question, documents, answer, errors)
* ``documents``   duck-typed document adapters (str, dict, LangChain, LlamaIndex, tuples, objects)
* ``content``     text extraction from answers/chunks; redaction hook and size cap
* ``attributes``  user attributes (model, prompt version, session/user id, tags, metadata)
* ``setup``       ``init()`` / ``shutdown()``: provider, exporter, co-existence
* ``_runtime``    process state, env settings, internal-error accounting (never raise into the app)

Importing the SDK pulls in the OpenTelemetry API/SDK only; the OTLP exporter is imported by
``init()``, the Kafka exporter only for ``exporter="kafka"``.
"""
