"""Per-job statistics, reported like Kafka's cleaner summary line and exported as metrics."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

MiB = 1024 * 1024


class JobOutcome(enum.StrEnum):
    """How one attempt at a job ended; the metrics label. The reason, if any, is in ``JobStats.reason``."""

    RUNNING = "running"
    # The outputs are live and the inputs obsolete.
    COMMITTED = "committed"
    # Lost a race (an input changed, or another runner took the lease over): the job is marked failed,
    # its outputs are left to orphan GC, and a later plan retries the work.
    ABANDONED = "abandoned"
    # The input is corrupt: the job is marked failed; retrying would read the same bytes.
    FAILED = "failed"
    # A retriable error (object store or metadata unavailable) stopped the attempt. The job keeps its lease
    # until it expires, then any runner re-runs it, up to the round's max_job_attempts.
    INTERRUPTED = "interrupted"


@dataclass
class JobStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_in: int = 0
    records_out: int = 0
    partitions: int = 0
    partitions_deduplicated: int = 0
    partial_partitions: int = 0  # the offset map filled before the dirty range ended
    map_utilization: float = 0.0  # the highest over the job's partitions
    pass1_seconds: float = 0.0
    pass2_seconds: float = 0.0
    pass1_bytes: int = 0
    pass2_bytes: int = 0
    gets: int = 0
    puts: int = 0
    input_files: int = 0
    output_files: int = 0
    tombstones_removed: int = 0
    outcome: JobOutcome = JobOutcome.RUNNING
    reason: str = ""  # why the attempt did not commit (an error's message); empty when it did
    owner: str = ""  # the runner that made this attempt
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def dedup_ratio(self) -> float:
        """Records removed / records read (0 = nothing removed)."""
        return 1 - self.records_out / self.records_in if self.records_in else 0.0

    def summary(self, job_id: int, kind: str) -> str:
        def rate(nbytes: int, seconds: float) -> str:
            return f"{nbytes / MiB / seconds:.1f} MiB/s" if seconds > 0 else "-"

        reason = f" ({self.reason})" if self.reason else ""
        return (
            f"job {job_id} ({kind}) {self.outcome}{reason}: "
            f"{self.input_files} file(s) in, {self.output_files} out; "
            f"{self.bytes_read / MiB:.1f} MiB read, {self.bytes_written / MiB:.1f} MiB written; "
            f"{self.records_in} records in, {self.records_out} out ({self.dedup_ratio:.1%} removed, "
            f"{self.tombstones_removed} tombstones); map {self.map_utilization:.1%} full; "
            f"pass 1 {self.pass1_seconds:.2f} s ({rate(self.pass1_bytes, self.pass1_seconds)}), "
            f"pass 2 {self.pass2_seconds:.2f} s ({rate(self.pass2_bytes, self.pass2_seconds)}); "
            f"{self.gets} GET(s), {self.puts} PUT(s)"
        )
