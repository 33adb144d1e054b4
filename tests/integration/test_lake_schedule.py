"""When the lake round commits a table (pipeline/lake/round.py): a table that the byte cap left behind
commits again at the next round, whatever its interval, until it has caught up; then its interval counts
from when its last run BEGAN, so a long commit does not push the next one later; and
``LakeRound.next_due_ms`` tells the loops when to run next. On a real agent (SQLite, a local directory),
with a manual clock: nothing here waits, and nothing depends on how fast the machine is.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.lake.offsets import committed_offsets
from pipeline.lake.round import LakeRound
from pipeline.lake.runs import COMMITTED, UP_TO_DATE, LakeWriterConfig
from storage.clock import ManualClock
from storage.lake_catalog import open_catalog
from storage.lake_config import default_table
from tests.fixtures.server import RunningServer, local_settings, run_server

pytestmark = pytest.mark.integration

HOUR_MS = 3_600_000
TOPIC = "scheduled"


class SlowCommit:
    """Makes each commit take half an hour of the manual clock, between its upload and the catalog."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock

    def before_commit(self, topic: str, table: Any) -> None:
        self.clock.advance(HOUR_MS / 2 / 1000)

    def after_commit(self, topic: str, table: Any) -> None:
        pass


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[RunningServer]:
    with run_server(local_settings(tmp_path)) as server:
        yield server


def lake_round(srv: RunningServer, clock: ManualClock, config: LakeWriterConfig) -> LakeRound:
    settings = srv.runtime.settings
    return LakeRound(
        srv.runtime.metadata,
        srv.runtime.store,
        lambda: open_catalog(settings.metadata_url, settings.bucket_url),
        clock,
        owner="scheduler-test",
        config=config,
        hook=SlowCommit(clock),
    )


def test_a_table_behind_commits_at_once_then_on_its_interval_from_the_run_start(
    srv: RunningServer,
) -> None:
    srv.create_topic(
        TOPIC, 1, **{"strata.iceberg.mode": "raw", "strata.iceberg.commit.interval.ms": str(HOUR_MS)}
    )
    for batch in range(3):  # three produce requests: three flushes, three chunks of partition 0
        response = srv.produce(TOPIC, [{"value": f"v{batch}-{i}", "partition": 0} for i in range(5)])
        assert response.status_code == 200, response.text
    clock = ManualClock(start_ms=int(time.time() * 1000))
    # A cap of one byte: each commit takes one chunk, and leaves the others behind.
    rounds = lake_round(srv, clock, LakeWriterConfig(max_bytes_per_commit=1))
    try:
        offsets = []
        for _ in range(3):
            (run,) = rounds.run_once().runs  # never forced: due because the last run was behind
            assert run.outcome == COMMITTED, run.error
            offsets.append(run.offsets[0])
            behind = run.lag_records > 0
            # Behind: due at once (0); caught up: an interval after this run began.
            assert rounds.next_due_ms() == (0 if behind else clock.now_ms() - HOUR_MS // 2 + HOUR_MS)
        assert offsets == [5, 10, 15]
        (row,) = [r for r in srv.runtime.metadata.lake_tables() if r.topic == TOPIC]
        assert (row.lag_records, row.error) == (0, None)
        assert row.last_run_ms == clock.now_ms() - HOUR_MS // 2  # when the last run began
        table = rounds.writer().catalog.load_table(default_table(TOPIC))
        assert committed_offsets(table)[0] == {0: 15}
        assert len(table.snapshots()) == 3
        # Caught up: not due until an interval after the last run began, half an hour from now.
        assert rounds.run_once().runs == []
        clock.advance((HOUR_MS // 2 - 1) / 1000)
        assert rounds.run_once().runs == []
        clock.advance(0.001)
        (run,) = rounds.run_once().runs
        assert run.outcome == UP_TO_DATE
    finally:
        rounds.close()
