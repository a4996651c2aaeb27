"""The readers: bytes (or in-process SDK spans) -> ``SpanRecord``s, and for protobuf spans of
traces read for latency only, ``LightSpan``s. Pure functions, no I/O. They import the span view
(``ingest/extract``), never the other way round.

- ``otlp``           the front: media type, compression, size bounds, then the format's reader
- ``decoded``        what every reader gives (batches) and the rules they share (limits, ids)
- ``otlp_proto``     the protobuf reader (compiled: ``ingest/_native.py``)
- ``proto_wire``     the protobuf wire format read from bytes (compiled)
- ``proto_values``   protobuf objects -> ``SpanRecord`` (a span decoded in full)
- ``otlp_json``      the OTLP/JSON reader
- ``sdk_spans``      finished in-process OpenTelemetry SDK spans -> ``SpanRecord`` (``ragmon eval --app``)
"""
