"""``strata_lake_gap_records_total``: offsets a lake table skipped because they were deleted (by retention
past its hold, ``planner/lake_hold.py``, or by DeleteRecords) before the table committed them.

Counted where the gap is certain: the writer's run that skips them (``LakeRun.gap_records``), not retention,
which judges by a lower bound of the table's offsets and may count records the table has. On the process's
one registry; the composition root (``strata/runtime.py``) hands ``observe_run`` to the lake round.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from pipeline.lake.runs import LakeRun


class LakeGapMetric:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.gap_records = Counter(
            "strata_lake_gap_records",
            "Offsets lake tables skipped: deleted before the table committed them",
            registry=registry,
        )

    def observe_run(self, run: LakeRun) -> None:
        if run.gap_records:
            self.gap_records.inc(run.gap_records)
