"""Per-job statistics, reported like Kafka's cleaner summary line, exported as metrics, and stored with
the job (``JobStats.report``): the HTTP API lists jobs with them.

The stored form (``to_doc``, read back by ``from_doc``) is a flat JSON object whose names are stable:
``outcome``; ``error`` ({code, message} of the error that ended an attempt without a commit, else null);
``records_in``/``records_out`` and ``offsets_removed`` (their difference: removed records leave their
offsets as holes); ``bytes_in``/``bytes_out`` (chunk bytes read and written, so their difference is what
compaction removed); ``bytes_read``/``bytes_written`` (what the GETs and PUTs moved: both passes, file
footers); ``duration_ms``; and the counters below under their own names.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from storage.metadata.rows import JobReport, TopicVolume

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
    error_code: int | None = None  # that error's code (storage/errors/); None when it committed
    owner: str = ""  # the runner that made this attempt
    duration_ms: int = 0  # from the attempt's start to its commit or its end
    # Per topic: records and chunk bytes read (pass 2 reads every input chunk) and written.
    topics: dict[str, TopicVolume] = field(default_factory=dict)
    extra: dict[str, object] = field(default_factory=dict)

    def count_in(self, topic: str, records: int, nbytes: int) -> None:
        v = self.topics.get(topic, TopicVolume())
        self.topics[topic] = TopicVolume(
            v.records_in + records, v.records_out, v.bytes_in + nbytes, v.bytes_out
        )

    def count_out(self, topic: str, records: int, nbytes: int) -> None:
        v = self.topics.get(topic, TopicVolume())
        self.topics[topic] = TopicVolume(
            v.records_in, v.records_out + records, v.bytes_in, v.bytes_out + nbytes
        )

    def fail(self, outcome: JobOutcome, code: int, message: str) -> None:
        """Record why the attempt ended without a commit."""
        self.outcome = outcome
        self.error_code = code
        self.reason = message

    def to_doc(self) -> dict[str, object]:
        """The stored form (see the module docstring)."""
        error = None if self.error_code is None else {"code": self.error_code, "message": self.reason}
        return {
            "outcome": self.outcome.value,
            "error": error,
            "records_in": self.records_in,
            "records_out": self.records_out,
            "offsets_removed": self.records_in - self.records_out,
            "bytes_in": sum(v.bytes_in for v in self.topics.values()),
            "bytes_out": sum(v.bytes_out for v in self.topics.values()),
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "duration_ms": self.duration_ms,
            "input_files": self.input_files,
            "output_files": self.output_files,
            "partitions": self.partitions,
            "partitions_deduplicated": self.partitions_deduplicated,
            "partial_partitions": self.partial_partitions,
            "tombstones_removed": self.tombstones_removed,
            "map_utilization": round(self.map_utilization, 6),
            "pass1_seconds": round(self.pass1_seconds, 6),
            "pass2_seconds": round(self.pass2_seconds, 6),
            "pass1_bytes": self.pass1_bytes,
            "pass2_bytes": self.pass2_bytes,
            "gets": self.gets,
            "puts": self.puts,
            "owner": self.owner,
        }

    @classmethod
    def from_doc(cls, doc: Mapping[str, object]) -> JobStats:
        """Back from ``to_doc`` (fields it lacks keep their defaults; per-topic volumes are not in it)."""

        def num(name: str) -> int:
            value = doc.get(name, 0)
            return int(value) if isinstance(value, int | float) else 0

        def real(name: str) -> float:
            value = doc.get(name, 0.0)
            return float(value) if isinstance(value, int | float) else 0.0

        error = doc.get("error")
        code, message = None, ""
        if isinstance(error, Mapping):
            raw_code = error.get("code")
            code = int(raw_code) if isinstance(raw_code, int) else None
            message = str(error.get("message", ""))
        try:
            outcome = JobOutcome(str(doc.get("outcome")))
        except ValueError:  # not one this version knows
            outcome = JobOutcome.RUNNING
        return cls(
            bytes_read=num("bytes_read"),
            bytes_written=num("bytes_written"),
            records_in=num("records_in"),
            records_out=num("records_out"),
            partitions=num("partitions"),
            partitions_deduplicated=num("partitions_deduplicated"),
            partial_partitions=num("partial_partitions"),
            map_utilization=real("map_utilization"),
            pass1_seconds=real("pass1_seconds"),
            pass2_seconds=real("pass2_seconds"),
            pass1_bytes=num("pass1_bytes"),
            pass2_bytes=num("pass2_bytes"),
            gets=num("gets"),
            puts=num("puts"),
            input_files=num("input_files"),
            output_files=num("output_files"),
            tombstones_removed=num("tombstones_removed"),
            outcome=outcome,
            reason=message,
            error_code=code,
            owner=str(doc.get("owner", "")),
            duration_ms=num("duration_ms"),
        )

    def report(self, outcome: JobOutcome | None = None) -> JobReport:
        """What the job's row keeps of this attempt; ``outcome`` overrides the current one (a commit stores
        its report in the commit's own transaction, before the outcome is known to be committed)."""
        doc = self.to_doc()
        if outcome is not None:
            doc["outcome"] = outcome.value
        return JobReport(doc, dict(self.topics))

    @property
    def dedup_ratio(self) -> float:
        """Records removed / records read (0 = nothing removed)."""
        return 1 - self.records_out / self.records_in if self.records_in else 0.0

    def summary(self, job_id: int, kind: str) -> str:
        def rate(nbytes: int, seconds: float) -> str:
            return f"{nbytes / MiB / seconds:.1f} MiB/s" if seconds > 0 else "-"

        code = f"{self.error_code}: " if self.error_code is not None else ""
        reason = f" ({code}{self.reason})" if self.reason else ""
        return (
            f"job {job_id} ({kind}) {self.outcome}{reason} in {self.duration_ms / 1000:.2f} s: "
            f"{self.input_files} file(s) in, {self.output_files} out; "
            f"{self.bytes_read / MiB:.1f} MiB read, {self.bytes_written / MiB:.1f} MiB written; "
            f"{self.records_in} records in, {self.records_out} out ({self.dedup_ratio:.1%} removed, "
            f"{self.tombstones_removed} tombstones); map {self.map_utilization:.1%} full; "
            f"pass 1 {self.pass1_seconds:.2f} s ({rate(self.pass1_bytes, self.pass1_seconds)}), "
            f"pass 2 {self.pass2_seconds:.2f} s ({rate(self.pass2_bytes, self.pass2_seconds)}); "
            f"{self.gets} GET(s), {self.puts} PUT(s)"
        )
