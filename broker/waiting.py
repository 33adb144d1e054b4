"""Whether every producing connection waits for its acks: the Kafka door's hint to the flush loop.

A connection can send no more Produce requests until a flush answers some of its own when:
- its client is an idempotent producer with 5 requests unanswered: Kafka requires
  ``max.in.flight.requests.per.connection`` <= 5 with idempotence, and every client enforces it
  (librdkafka, the Java client, kafka-python, aiokafka, kafkajs);
- or its unanswered requests reached the listener's ``max_inflight_per_connection``, at which the
  connection stops being read (broker/connection.py).
When every connection with Produce requests waiting is in that state, nothing more can arrive through this
door until a flush completes, and the idle cut's quiet period (``flush_idle_ms``) only delays the acks.
The listener then tells the agent (``Agent.senders_waiting``), which cuts at once, still only a buffer of
at least ``flush_idle_bytes``. Measured with one idempotent librdkafka producer (docs/benchmarks.md): each
round trip was its ~5 requests arriving, 5 ms of waiting for quiet, then the flush.

One ``ProducerWaits`` serves a listener; each connection reports its own state as it changes.
"""

from __future__ import annotations

from typing import Protocol

# The most requests an idempotent producer keeps unanswered on one connection (Kafka's limit). Whether a
# request is an idempotent producer's is read from its batches' producer ids as the produce path checks
# them (broker/handlers/produce.py, ``PendingAnswer.idempotent``).
IDEMPOTENT_MAX_IN_FLIGHT = 5


class Senders(Protocol):
    def senders_waiting(self) -> None: ...


class ProducerWaits:
    """Counts the connections with Produce requests waiting, and those of them that can send no more."""

    __slots__ = ("blocked", "producing")

    def __init__(self) -> None:
        self.producing = 0
        self.blocked = 0

    def change(self, before: tuple[bool, bool], after: tuple[bool, bool], agent: Senders) -> None:
        """A connection's (producing, blocked) went from ``before`` to ``after``; tells ``agent`` when that
        left every producing connection blocked."""
        if before == after:
            return
        self.producing += after[0] - before[0]
        self.blocked += after[1] - before[1]
        # Newly true when this connection became blocked, or stopped producing beside blocked ones.
        if self.blocked == self.producing > 0 and (after[1] or not after[0]):
            agent.senders_waiting()
