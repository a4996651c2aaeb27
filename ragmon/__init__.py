"""ragmon: an OpenTelemetry-native quality monitor for production RAG systems.

Public facade. In your app::

    import ragmon
    ragmon.init(service_name="support-bot")

    @ragmon.retriever
    def search(query): ...

The agent (``ragmon agent``) and the judges live in submodules that the SDK never imports.
"""

from ._version import __version__
from .sdk.decorators import generator, pipeline, retriever
from .sdk.manual import current_span, current_trace_id, record_feedback, span
from .sdk.setup import flush, init, shutdown
from .sdk.spans import RagSpan
from .types import Document, RagTrace, Scores

__all__ = [
    "Document",
    "RagSpan",
    "RagTrace",
    "Scores",
    "__version__",
    "current_span",
    "current_trace_id",
    "flush",
    "generator",
    "init",
    "pipeline",
    "record_feedback",
    "retriever",
    "shutdown",
    "span",
]
