"""When the open buffer is cut into a flush: the flush policy, and the topic classes it serves.

Every flush is one file and one PUT, whatever topics it holds; what differs between classes is how long a
record may wait in the open buffer for others to share its PUT.

- **standard** (``strata.flush.class=standard``): a record waits at most ``flush_interval_ms``; the
  buffer is also cut at ``flush_bytes``, and by the idle cut: once it holds ``flush_idle_bytes`` and no
  request has come for ``flush_idle_ms``, or at once when every sender is known to wait for its acks
  (``senders_waiting``, broker/waiting.py). On S3 this keeps PUTs near one per interval under a trickle.
- **low-latency** (``strata.flush.class=low-latency``): a record waits at most ``low_latency_ms``: none
  on a local directory (the flush loop's next turn), about one PUT's time on S3 (a flush cut sooner would
  only queue behind the uploads in flight). Records of standard topics buffered at that moment ride in the
  same file: they cost no PUT of their own, and the cut is counted as the low-latency class's.

So a low-latency record never waits behind the standard interval, and a standard topic never pays for
low-latency PUTs: every cut is counted under the one class whose deadline (or size) caused it
(``FlushCause``), which the metrics and the console's cost view report per class.

The policy is pure: it reads the buffer's times and sizes and answers a deadline, so the flush loop
(agents/agent.py) keeps the waiting and the cutting, and the rules are testable without a loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from storage.topic_config import FLUSH_CLASSES, LOW_LATENCY, STANDARD

__all__ = [
    "FLUSH_CLASSES",
    "LOW_LATENCY",
    "LOW_LATENCY_DEPTH",
    "LOW_LATENCY_PIPELINE_BYTES",
    "STANDARD",
    "FlushCause",
    "FlushPolicy",
    "low_latency_depth",
    "pipeline_full",
]

# A low-latency cut waits while this many flushes are still uploading or committing. Flushes commit one at a
# time, in cut order, so cutting faster than they commit only queues flushes for their turn: at 20 MiB/s of
# small requests, cuts every millisecond left each flush waiting ~33 ms for the commits before it. With one
# flush committing and one uploading, the records that arrive meanwhile join the next cut instead, and a
# record waits at most about two flushes' time. Standard cuts use every slot (AgentConfig.inflight_flushes).
LOW_LATENCY_DEPTH = 2
# ... but the second of those two flushes is cut only once the buffer holds this much (or when the first
# is done). Under many producers the buffer is never empty, and cutting whenever a slot is free made
# flushes of under 1 MiB, each paying a file's and a commit's fixed CPU: the agent's CPU per MiB rose by a
# quarter and its throughput fell by as much. One idempotent producer sends ~1 MiB requests, so its flushes
# still overlap (its window of five needs them to), and a trickle never reaches the second cut at all: a
# low-latency record then waits at most for the one flush in flight.
LOW_LATENCY_PIPELINE_BYTES = 2 << 20


def low_latency_depth(open_bytes: int) -> int:
    """How many flushes may be in flight when a low-latency cut is made of ``open_bytes``."""
    return LOW_LATENCY_DEPTH if open_bytes >= LOW_LATENCY_PIPELINE_BYTES else 1


def pipeline_full(cause: FlushCause, open_bytes: int, in_flight: int, max_in_flight: int) -> bool:
    """Whether a cut of ``cause`` and ``open_bytes`` must wait for one of ``in_flight`` flushes to end:
    standard cuts use every slot (``max_in_flight``), low-latency ones ``low_latency_depth``."""
    depth = low_latency_depth(open_bytes) if cause is FlushCause.LOW_LATENCY else max_in_flight
    return in_flight >= depth


class FlushCause(StrEnum):
    """Which class a cut is counted under: the one whose rule made it."""

    STANDARD = STANDARD
    LOW_LATENCY = LOW_LATENCY


@dataclass(frozen=True, slots=True)
class FlushPolicy:
    interval_s: float
    flush_bytes: int
    idle_s: float  # 0: no idle cut
    idle_bytes: int
    low_latency_s: float

    def deadline(
        self,
        open_bytes: int,
        first_at: float,
        last_at: float,
        urgent_at: float | None,
        senders_waiting: bool,
    ) -> tuple[float, FlushCause]:
        """The monotonic time the open buffer is due to be cut, and the class the cut counts under.

        ``first_at`` and ``last_at``: arrival of the buffer's first and latest request; ``urgent_at``: of
        its first low-latency request (None: it holds none). A full buffer is due now (the size rule is
        the standard class's: every class's records fill it).
        """
        if open_bytes >= self.flush_bytes:
            return first_at, FlushCause.STANDARD
        due = first_at + self.interval_s
        if self.idle_s > 0 and open_bytes >= self.idle_bytes:
            due = min(due, last_at if senders_waiting else last_at + self.idle_s)
        if urgent_at is not None and urgent_at + self.low_latency_s < due:
            return urgent_at + self.low_latency_s, FlushCause.LOW_LATENCY
        return due, FlushCause.STANDARD
