"""OTLP decoding, trace assembly and span sources. Protobuf and Kafka objects stay here.

Modules:

- ``source``           the SpanSource / SpanSink contract (the sink's ``latency_only`` included)
- ``http_receiver``, ``grpc_receiver``, ``kafka_source``, ``composite_source``  the sources;
  ``handover`` (how a receiver hands spans over), ``offsets`` (Kafka commits), ``settings``,
  ``kafka_wait`` (aiokafka's waits for a topic or coordinator as one line), ``kafka_handover`` (what
  a partition's owner tells the next in its offset commit's metadata)
- ``otlp``             the front: media type, compression, size bounds, then the format's reader
- ``decoded``          what every reader gives (batches) and the rules they share (limits, ids)
- ``otlp_proto``       the protobuf reader (``proto_wire``: the wire format read from bytes;
  ``proto_values``: protobuf objects -> ``SpanRecord``)
- ``otlp_json``        the OTLP/JSON reader
- ``sdk_spans``        the reader of in-process OpenTelemetry SDK spans (``ragmon eval --app``)
- ``extract/``         span view -> ``RagTrace`` (full) and the latency-only view (``LightSpan``)
- ``assembler``        trace-id window; closes traces
- ``tally``            a batch's metric updates, applied together
- ``_native``          the compiled (mypyc) hot path, or its pure-Python source
"""

from ._native import install as _install_native

_install_native()  # compiled hot modules or their .py, decided before any is imported (_native.py)
