"""Differential tests: the same Kafka protocol workload sent to Strata and to a real Kafka broker.

``python -m tests.differential`` (``make differential``) starts the reference broker (Apache Kafka in KRaft
mode, tests/fixtures/reference_broker.py) and an embedded Strata agent, runs every scenario of
``scenarios.py`` against both over raw protocol frames, and compares every answer the protocol pins down:
error codes, offsets, log start and high watermarks, ListOffsets by time and max timestamp, configs with
their sources and defaults, group states and assignments, and the records returned. What differs by
design is listed in ``divergences.py`` with its reason (and in docs/kafka-clients.md); anything else that
differs fails the run. tests/differential/test_differential.py runs a subset in ``make test``.
"""
