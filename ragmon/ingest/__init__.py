"""OTLP decoding, trace assembly and span sources. Protobuf and Kafka objects stay here."""
