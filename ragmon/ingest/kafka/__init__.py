"""The Kafka source: OTLP messages from a consumer group, at least once. aiokafka stays in here.

A partition's *hand-off* between agents has two sides: the owner that gives it up forgets its
open traces unjudged (the sink's ``hand_over_where``) and commits below them with an *owner note*
in the commit's metadata (the traces it already accounted for); the agent that takes it over reads
the note and skips those traces (*takeover*).

- ``source``         ``KafkaSource``: the consumer loop, decoding each message, flow control
                     (pausing partitions under back-pressure), poison messages, lag
- ``handoff``        the partitions it owns and how they come and go: commits with their owner
                     notes, giving partitions up (``hand_over``), taking them over
- ``connection``     aiokafka's options from the settings, stopping a consumer, the broker's health
- ``offsets``        which offsets are safe to commit (compiled: ``ingest/_native.py``)
- ``owner_note``     the owner note: what one owner tells the next in its commit's metadata
- ``takeover``       the new owner's side: what it inherited and what to skip or count
- ``dead_letters``   the dead-letter topic for refused (poison, oversize) messages
- ``waiting``        aiokafka's start-up waits (topic, coordinator) logged as one line
- ``settings``       the Kafka source's settings section
"""
