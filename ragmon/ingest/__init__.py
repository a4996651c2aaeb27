"""The agent's edges and the decode model: spans in, closed traces out. Protobuf and Kafka objects
stay here.

Packages, by job:

- ``receivers/``       the OTLP/HTTP and OTLP/gRPC receivers and their admission
- ``kafka/``           the Kafka source: consumer, offsets, the partition hand-off between agents
                       (owner note, takeover), dead letters
- ``decode/``          one reader per input format (OTLP protobuf, OTLP/JSON, in-process SDK spans)
                       into one span view, behind the OTLP front
- ``extract/``         span view -> ``RagTrace`` (full) and the latency-only view (``LightSpan``)

Modules:

- ``source``           the SpanSource / SpanSink contract (the sink's ``latency_only`` included) and
                       how a source reads it (``latency_only_of``, ``batch_of``)
- ``composite_source`` several sources run as one (the HTTP and gRPC receivers side by side)
- ``assembler``        trace-id window; closes traces
- ``closed_trace``     what it closes: ``ClosedTrace``, its ``RagTrace`` built (at once or when asked), the
                       text bound
- ``tally``            a batch's metric updates, applied together
- ``_native``          the compiled (mypyc) hot path, or its pure-Python source
"""

from ._native import install as _install_native

_install_native()  # compiled hot modules or their .py, decided before any is imported (_native.py)
