"""The Kafka front door: Kafka's wire protocol on the same agent core as the HTTP API.

Layers (as Kafka's KafkaApis): ``frames`` reads and writes length-prefixed frames and peeks at request
headers; ``codec`` turns frames into typed requests (kafka-python's protocol classes; Produce by hand);
``apis`` is the one table from API key to versions and handler, from which ApiVersions is derived;
``handlers/`` take a typed request and return a typed response (or raise a ``StrataError`` that
``errors`` maps to a Kafka error code) and never touch a socket; ``connection`` reads frames and admits
requests, ``answers`` writes their answers in request order, ``sasl`` gates a connection until its
client authenticates; ``server`` accepts connections.

Never named ``kafka``: that would shadow kafka-python.
"""
