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
from .sdk.manual import record_feedback, span
from .sdk.setup import init, shutdown
from .types import Document, RagTrace, Scores

__all__ = [
    "Document",
    "RagTrace",
    "Scores",
    "__version__",
    "generator",
    "init",
    "pipeline",
    "record_feedback",
    "retriever",
    "shutdown",
    "span",
]
