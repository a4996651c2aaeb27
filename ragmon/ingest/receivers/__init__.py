"""The OTLP receivers: spans pushed to the agent over HTTP or gRPC, answered by the OTLP spec
(a retryable 503 / UNAVAILABLE before anything is accepted when the agent cannot take them).

- ``http_receiver``  OTLP/HTTP (``POST /v1/traces``, protobuf or JSON), an aiohttp server
- ``grpc_receiver``  OTLP/gRPC (``TraceService/Export``), a ``grpc.aio`` server
- ``base``           what both are, written once: the ``SpanSource`` surface and the path of one
                     export (token, admission, decoding off the loop, submission, accounting) to
                     an outcome each answers in its protocol
- ``admission``      that path's admission: refuse while closed or under back-pressure, admit
                     an export's traces, submit its spans to the sink in slices
- ``settings``       the receivers' settings sections
"""
