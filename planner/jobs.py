"""The planner's vocabulary, used with these names everywhere:

- ``JobSpec``: the description of a piece of work: which files to read, which level to write. Pure data,
  stored as JSON in the ``jobs`` row.
- ``Job`` (storage.metadata.rows): the durable decision: the jobs row, its state and its lease. Creating it
  claims the input files, so no two active jobs ever share one.
- ``JobRun`` (planner.job_run): one running attempt of a job by a ``JobRunner``, with its statistics. A
  crashed attempt leaves only orphan uploads; after the lease expires another attempt runs the same spec.

Kinds:
- ``merge``: rewrite small files of one level as fewer, larger files one level up. Compacted partitions are
  deduplicated along the way (as early as the first merge), within what the job holds.
- ``clean``: rewrite every file that holds a due compacted partition (and the other due partitions that
  share those files), so each one's whole log, every level, is deduplicated in one pass from its log
  start (Kafka's cleaner round). Output stays at the highest input level (at least 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

JOB_MERGE = "merge"
JOB_CLEAN = "clean"
MAX_LEVEL = 2


@dataclass(frozen=True, slots=True)
class InputFile:
    file_id: int
    object_key: str
    size: int
    level: int


@dataclass(frozen=True, slots=True)
class JobSpec:
    kind: str
    output_level: int
    inputs: tuple[InputFile, ...]
    reason: str

    @property
    def file_ids(self) -> list[int]:
        return [f.file_id for f in self.inputs]

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "output_level": self.output_level,
            "reason": self.reason,
            "inputs": [
                {"file_id": f.file_id, "object_key": f.object_key, "size": f.size, "level": f.level}
                for f in self.inputs
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> JobSpec:
        raw_inputs = data["inputs"]
        assert isinstance(raw_inputs, list)
        inputs = tuple(
            InputFile(int(f["file_id"]), str(f["object_key"]), int(f["size"]), int(f["level"]))
            for f in raw_inputs
        )
        return cls(str(data["kind"]), int(str(data["output_level"])), inputs, str(data.get("reason", "")))
