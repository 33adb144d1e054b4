"""A limit on how fast compaction reads, as Kafka's log cleaner has one.

Kafka's ``log.cleaner.io.max.bytes.per.second`` (unlimited by default) keeps the cleaner from taking the
disk bandwidth that producers and consumers need. Strata's merges and cleans read whole files through
their GET streams, and on a small machine they took the CPU and store requests a consumer's catch-up
needed: in the `all` role on a small machine, a librdkafka consumer caught up several times slower while
merges ran than with no background jobs (docs/benchmarks.md).

``ReadThrottle`` is a token bucket: ``take(n)`` is called after ``n`` bytes were read and sleeps (the
injected clock's ``sleep``) for as long as it takes the bucket to cover them. The bucket holds at most one
second of reading, so a job that was idle can start at full speed for a second and never faster than the
rate over any longer stretch. One throttle serves a worker's job runner, so the limit is per worker.
Thread-safe: the runner's reads may come from more than one thread.
"""

from __future__ import annotations

import threading

from storage.clock import Clock
from storage.errors import SettingsError

MiB = 1024 * 1024
# A rate below this could keep one chunk (up to an output file, 16 MiB by default, or one larger input
# chunk) longer than a job's 60 s lease, which the runner renews between chunks, not during a read.
MIN_BYTES_PER_SECOND = MiB


def check_rate(bytes_per_second: int) -> None:
    """SettingsError unless the rate is 0 (no limit) or at least MIN_BYTES_PER_SECOND."""
    if bytes_per_second != 0 and bytes_per_second < MIN_BYTES_PER_SECOND:
        raise SettingsError(
            f"compaction read rate must be 0 (unlimited) or at least {MIN_BYTES_PER_SECOND} bytes/s, "
            f"got {bytes_per_second}"
        )


class ReadThrottle:
    """At most ``bytes_per_second`` read per second (0: no limit), over any stretch of a second or more."""

    def __init__(self, bytes_per_second: int, clock: Clock) -> None:
        check_rate(bytes_per_second)
        self.rate = bytes_per_second
        self.clock = clock
        self._lock = threading.Lock()
        self._tokens = float(bytes_per_second)  # starts full: one second of reading
        self._at = clock.monotonic()
        self.slept = 0.0  # seconds spent waiting, for the job statistics and tests

    def take(self, nbytes: int) -> None:
        """Account ``nbytes`` just read; sleep until the rate allows them."""
        if self.rate == 0 or nbytes <= 0:
            return
        with self._lock:
            now = self.clock.monotonic()
            self._tokens = min(float(self.rate), self._tokens + (now - self._at) * self.rate)
            self._at = now
            self._tokens -= nbytes
            # Invariant: tokens <= rate. A debt (tokens < 0) is paid by waiting debt / rate; the wait is
            # counted as refill when the next take computes the time passed, so it is not paid twice.
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
            self.slept += wait
        if wait > 0:
            self.clock.sleep(wait)


__all__ = ["MIN_BYTES_PER_SECOND", "ReadThrottle", "check_rate"]
