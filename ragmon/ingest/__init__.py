"""OTLP decoding, trace assembly and span sources. Protobuf and Kafka objects stay here."""

from ._native import install as _install_native

_install_native()  # compiled hot modules or their .py, decided before any is imported (_native.py)
