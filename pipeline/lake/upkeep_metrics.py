"""The lake's upkeep metrics, on the process's one registry (the composition root, ``strata/runtime.py``,
hands ``observe_run`` and ``observe_maintenance`` to the lake round):

- ``strata_lake_gap_records_total``: offsets a lake table skipped because they were deleted (by retention
  past its hold, ``planner/lake_hold.py``, or by DeleteRecords) before the table committed them. Counted
  where the gap is certain, the writer's run that skips them (``LakeRun.gap_records``), not by retention,
  which judges by a lower bound of the table's offsets and may count records the table has.
- ``strata_lake_table_objects`` and ``strata_lake_table_bytes``, by table: what the table's location held
  after its last maintenance here (``pipeline/lake/maintenance.py`` lists it anyway, so they cost nothing
  more). The lake's share of the bucket, as of the last maintenance of this process (hourly).
- ``strata_lake_orphans_deleted_total`` and ``strata_lake_snapshots_expired_total``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from pipeline.lake.maintenance import MaintenanceResult
from pipeline.lake.runs import LakeRun


class LakeUpkeepMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.gap_records = Counter(
            "strata_lake_gap_records",
            "Offsets lake tables skipped: deleted before the table committed them",
            registry=r,
        )
        self.objects = Gauge(
            "strata_lake_table_objects", "Objects under a lake table's location", ["table"], registry=r
        )
        self.bytes = Gauge(
            "strata_lake_table_bytes", "Bytes under a lake table's location", ["table"], registry=r
        )
        self.orphans = Counter(
            "strata_lake_orphans_deleted", "Unreferenced lake files deleted by maintenance", registry=r
        )
        self.expired = Counter(
            "strata_lake_snapshots_expired", "Lake table snapshots expired by maintenance", registry=r
        )

    def observe_run(self, run: LakeRun) -> None:
        if run.gap_records:
            self.gap_records.inc(run.gap_records)

    def observe_maintenance(self, result: MaintenanceResult) -> None:
        self.orphans.inc(result.orphans_deleted)
        self.expired.inc(result.snapshots_expired)
        if result.objects is not None and result.bytes is not None:
            self.objects.labels(result.table).set(result.objects)
            self.bytes.labels(result.table).set(result.bytes)
