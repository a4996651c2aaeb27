"""The OTLP receivers: spans pushed to the agent over HTTP or gRPC, answered by the OTLP spec
(a retryable 503 / UNAVAILABLE before anything is accepted when the agent cannot take them).

- ``http_receiver``  OTLP/HTTP (``POST /v1/traces``, protobuf or JSON), an aiohttp server
- ``grpc_receiver``  OTLP/gRPC (``TraceService/Export``), a ``grpc.aio`` server, and its settings
- ``admission``      what both do around decoding an export: refuse while closed or under
                     back-pressure, admit its traces, submit its spans to the sink in slices
- ``settings``       the OTLP/HTTP receiver's settings section
"""
