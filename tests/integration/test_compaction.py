"""Compaction end to end: our LogCleanerTest. Records go in over HTTP; the real worker compacts them."""

from __future__ import annotations

import itertools
import random
import zlib
from typing import Any

import pytest

from planner.offset_map import FakeOffsetMap
from planner.round import CompactionRound, RoundConfig
from planner.runner import RunnerConfig
from storage import records
from storage.clock import SkewedClock
from storage.errors import SettingsError
from storage.objectstore.base import GET, PUT
from storage.records import compression
from strata.settings import load_settings
from tests.fixtures.server import RunningServer
from tests.kafka.compressed import stored_batches

pytestmark = pytest.mark.integration

COMPACT = {"cleanup.policy": "compact"}


def compactor(srv: RunningServer, **kwargs: Any) -> CompactionRound:
    rt = srv.runtime
    return CompactionRound(rt.store, rt.metadata, rt.clock, random.Random(7), owner="test-worker", **kwargs)


def produce_updates(srv: RunningServer, topic: str, rounds: list[dict[str, str | None]]) -> None:
    """Each round is one request (so at least one flush each): key -> value (None = tombstone)."""
    for updates in rounds:
        response = srv.produce(topic, [{"key": k, "value": v} for k, v in updates.items()])
        assert response.status_code == 200, response.text


def log_of(srv: RunningServer, topic: str, partitions: int) -> dict[int, list[dict[str, Any]]]:
    return {p: srv.read_all(topic, p) for p in range(partitions)}


def latest(log: dict[int, list[dict[str, Any]]]) -> dict[str, tuple[int, int, str | None]]:
    """key -> (partition, offset, value) of its last record."""
    out: dict[str, tuple[int, int, str | None]] = {}
    for partition, recs in log.items():
        for rec in recs:
            out[rec["key"]] = (partition, rec["offset"], rec["value"])
    return out


def run_until_idle(c: CompactionRound, topic: str | None = None, force: bool = True, limit: int = 20) -> int:
    rounds = 0
    while rounds < limit:
        result = c.run_once(topic, force)
        rounds += 1
        if not result.jobs:
            return rounds
    raise AssertionError("compaction did not settle")


def test_dedup_keeps_the_latest_value_of_every_key_at_its_original_offset(srv: RunningServer) -> None:
    srv.create_topic("cfg", partitions=4, **COMPACT)
    rounds = [{f"key-{k}": f"v{r}-{k}" for k in range(40)} for r in range(10)]
    produce_updates(srv, "cfg", rounds)
    before = log_of(srv, "cfg", 4)
    assert sum(len(v) for v in before.values()) == 400

    c = compactor(srv)
    run_until_idle(c, "cfg")
    after = log_of(srv, "cfg", 4)

    assert latest(after) == latest(before)
    assert sum(len(v) for v in after.values()) == 40  # exactly one record per key survives
    for partition in range(4):
        offsets_after = [r["offset"] for r in after[partition]]
        offsets_before = {r["offset"] for r in before[partition]}
        assert offsets_after == sorted(set(offsets_after))  # strictly increasing
        assert set(offsets_after) <= offsets_before  # never a new offset
        # High watermark and log start are untouched: compaction never moves offsets.
        state = srv.client.get(f"/v1/topics/cfg/partitions/{partition}/offsets").json()
        assert state == {
            "log_start_offset": 0,
            "high_watermark": len(before[partition]),
            "last_stable_offset": len(before[partition]),
        }
        # Fetching a removed offset returns the next survivor.
        removed = sorted(offsets_before - set(offsets_after))
        if removed:
            body = srv.fetch("cfg", partition, removed[0]).json()
            assert body["records"][0]["offset"] == min(o for o in offsets_after if o > removed[0])

    # Compacting again changes nothing.
    run_until_idle(c, "cfg")
    assert log_of(srv, "cfg", 4) == after


def test_partial_cleaning_with_a_tiny_map_converges(srv: RunningServer) -> None:
    srv.create_topic("small", partitions=1, **COMPACT)
    rounds = [{f"k{k}": f"{r}" for k in range(12)} for r in range(6)]
    produce_updates(srv, "small", rounds)
    c = compactor(srv, offset_map=FakeOffsetMap(5))
    counts = [len(srv.read_all("small", 0))]
    for _ in range(20):
        c.run_once("small", force=True)
        counts.append(len(srv.read_all("small", 0)))
        if counts[-1] == 12:
            break
    assert counts[-1] == 12, counts  # converged to one record per key
    assert all(b <= a for a, b in itertools.pairwise(counts))  # never grows
    assert len(counts) > 2  # it took several rounds: each made progress with a map of 5
    assert {r["key"]: r["value"] for r in srv.read_all("small", 0)} == {f"k{k}": "5" for k in range(12)}


def test_tombstone_lifecycle(srv: RunningServer, clock: SkewedClock) -> None:
    srv.create_topic("t", partitions=1, **COMPACT, **{"delete.retention.ms": 60_000})
    produce_updates(srv, "t", [{"gone": "v1", "stays": "s1"}, {"gone": None}, {"stays": "s2"}])
    c = compactor(srv)
    run_until_idle(c, "t")
    recs = srv.read_all("t", 0)
    # The tombstone is kept (its horizon starts now) and the value it deletes is gone.
    assert [(r["key"], r["value"]) for r in recs] == [("gone", None), ("stays", "s2")]

    clock.advance(30)
    run_until_idle(c, "t")
    assert [(r["key"], r["value"]) for r in srv.read_all("t", 0)] == [("gone", None), ("stays", "s2")]

    clock.advance(31)  # past delete.retention.ms since the tombstone was first kept
    produce_updates(srv, "t", [{"stays": "s3"}])  # new dirty data so the partition is cleaned again
    run_until_idle(c, "t")
    assert [(r["key"], r["value"]) for r in srv.read_all("t", 0)] == [("stays", "s3")]


def test_min_compaction_lag_protects_recent_records(srv: RunningServer, clock: SkewedClock) -> None:
    srv.create_topic("lag", partitions=1, **COMPACT, **{"min.compaction.lag.ms": 3_600_000})
    produce_updates(srv, "lag", [{"k": str(i)} for i in range(5)])
    c = compactor(srv)
    run_until_idle(c, "lag")
    assert len(srv.read_all("lag", 0)) == 5  # newer than min.compaction.lag.ms: untouched
    clock.advance(3601)
    run_until_idle(c, "lag")
    assert [r["value"] for r in srv.read_all("lag", 0)] == ["4"]


def test_selection_by_dirty_ratio_and_max_lag(srv: RunningServer, clock: SkewedClock) -> None:
    srv.create_topic("dirty", partitions=1, **COMPACT)
    srv.create_topic("clean-enough", partitions=1, **COMPACT, **{"min.cleanable.dirty.ratio": 0.99})
    srv.create_topic("old", partitions=1, **COMPACT, **{"min.cleanable.dirty.ratio": 0.99})
    srv.create_topic("plain", partitions=1)
    for topic in ("dirty", "clean-enough", "old", "plain"):
        produce_updates(srv, topic, [{f"k{i}": "x" for i in range(5)}])
    c = compactor(srv)
    # Clean what is due: everything is dirty (never cleaned: ratio 1.0), except that "clean-enough" asks 0.99.
    due = {(d.topic, d.partition) for d in c.planner.dirty_partitions()}
    assert due == {("dirty", 0), ("clean-enough", 0), ("old", 0)}
    run_until_idle(c, force=False)
    produce_updates(srv, "dirty", [{f"k{i}": "y" for i in range(5)}])
    produce_updates(srv, "clean-enough", [{"k0": "y"}])
    produce_updates(srv, "old", [{"k0": "y"}])
    ratios = {d.topic: d.dirty_ratio for d in c.planner.dirty_partitions()}
    assert "clean-enough" not in ratios  # ratio ~0.2 < 0.99
    assert "old" not in ratios
    assert "dirty" in ratios  # ratio 0.5 >= the default 0.5
    srv.client.patch("/v1/topics/old/configs", json={"configs": {"max.compaction.lag.ms": 1000}})
    clock.advance(2)
    due_now = [d.topic for d in c.planner.dirty_partitions()]
    assert "old" in due_now  # dirty data older than max.compaction.lag.ms is due whatever the ratio
    assert "plain" not in due_now  # cleanup.policy=delete is never deduplicated


def test_unkeyed_records_are_refused_by_compacted_topics(srv: RunningServer) -> None:
    srv.create_topic("keys", **COMPACT)
    response = srv.produce("keys", [{"value": "no key"}])
    assert response.json()["error_code"] == 42206


def test_rewritten_batches_are_compressed_at_the_topics_level(srv: RunningServer) -> None:
    """A batch that loses records is compressed again at the topic's level for its codec, read when the
    job runs; a batch kept whole is copied as stored."""
    srv.create_topic("lvl", **COMPACT, **{"compression.type": "gzip", "compression.gzip.level": "1"})

    def value(key: int, round_: int) -> str:
        # Random words: zlib's levels then give different streams (a repeated phrase gives one for 4-9).
        rng = random.Random(key * 2 + round_)
        return " ".join(
            rng.choice(("order", "paid", "shipped", "pending", "refund", "parcel")) for _ in range(80)
        )

    produce_updates(srv, "lvl", [{f"k{k}": value(k, 0) for k in range(30)}])
    produce_updates(srv, "lvl", [{f"k{k}": value(k, 1) for k in range(15)}])
    # Several zlib levels can give one stream; of 1 and the default 6, only 1 gives these.
    assert [{1, 6} & gzip_levels(batch) for _, batch in stored_batches(srv.runtime, "lvl", 0)] == [{1}, {1}]
    changed = srv.client.patch("/v1/topics/lvl/configs", json={"configs": {"compression.gzip.level": "9"}})
    assert changed.status_code == 200, changed.text
    run_until_idle(compactor(srv), "lvl")
    after = stored_batches(srv.runtime, "lvl", 0)
    # The first batch kept keys 15-29 and was rewritten at 9; the second kept all of its 15, as stored.
    assert [(h.records_count, {1, 6, 9} & gzip_levels(batch)) for h, batch in after] == [(15, {9}), (15, {1})]
    assert latest(log_of(srv, "lvl", 1)) == {
        f"k{k}": (0, k if k >= 15 else 30 + k, value(k, 0 if k >= 15 else 1)) for k in range(30)
    }


def gzip_levels(batch: bytes) -> set[int]:
    """The zlib levels whose deflate stream the batch's gzip member holds."""
    header = records.read_header(batch, 0, True)
    stream = batch[records.RECORD_BATCH_OVERHEAD : header.size]
    raw = compression.decompress(compression.GZIP, stream, 1 << 24)
    found = set()
    for level in range(1, 10):
        deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
        if stream[10:-8] == deflater.compress(raw) + deflater.flush():
            found.add(level)
    return found


def test_two_get_streams_per_input_file_and_one_put_per_output_file(srv: RunningServer) -> None:
    srv.create_topic("req", partitions=8, **COMPACT)
    produce_updates(srv, "req", [{f"k{k}": f"{r}" for k in range(64)} for r in range(5)])
    c = compactor(srv)
    files = srv.runtime.metadata.live_files(0)
    assert len(files) >= 5
    gets, puts = srv.runtime.counters.get(GET), srv.runtime.counters.get(PUT)
    result = c.run_once("req", force=True)
    ((_, stats),) = result.jobs
    assert stats.outcome == "committed"
    assert stats.input_files == len(files)
    assert stats.gets == 2 * len(files)  # one stream per pass per input file, whatever the partition count
    assert stats.puts == stats.output_files == 1
    assert srv.runtime.counters.get(GET) - gets == 2 * len(files)
    assert srv.runtime.counters.get(PUT) - puts == 1


def test_merge_separates_compacted_data_and_joins_consecutive_chunks(srv: RunningServer) -> None:
    srv.create_topic("events", partitions=2)
    srv.create_topic("state", partitions=2, **COMPACT)
    for i in range(6):
        srv.produce("events", [{"key": f"e{i}", "value": "x", "partition": i % 2}])
        srv.produce("state", [{"key": f"s{i % 3}", "value": str(i), "partition": 0}])
    before_events = log_of(srv, "events", 2)
    c = compactor(srv)
    job = c.planner._merge(0)  # merge L0 now, whatever the thresholds
    assert job is not None
    c.run_jobs()
    meta = srv.runtime.metadata
    l1 = meta.live_files(1)
    assert len(l1) == 2  # compacted-topic data and other data in separate files
    assert meta.live_files(0) == []
    chunks = {(fc.chunk.topic, fc.chunk.partition) for fc in meta.file_chunks([f.file_id for f in l1])}
    per_file = [{fc.chunk.topic for fc in meta.file_chunks([f.file_id])} for f in l1]
    assert sorted(map(sorted, per_file)) == [["events"], ["state"]]
    # Consecutive chunks of one partition became one chunk.
    assert len(meta.partition_chunks("events", 0)) == 1
    assert chunks == {("events", 0), ("events", 1), ("state", 0)}
    assert log_of(srv, "events", 2) == before_events
    # The merge deduplicated the compacted topic as early as the first merge.
    assert [r["value"] for r in srv.read_all("state", 0)] == ["3", "4", "5"]


def test_output_chunks_and_files_are_bounded(srv: RunningServer) -> None:
    srv.create_topic("hot", partitions=1)
    srv.create_topic("hotc", partitions=1, **COMPACT)
    for i in range(6):
        srv.produce("hot", [{"key": f"k{i}", "value": "x" * 100}])
        srv.produce("hotc", [{"key": f"k{i % 2}", "value": str(i)}])
    before = srv.read_all("hot", 0)
    c = compactor(srv, config=RoundConfig(runner=RunnerConfig(max_output_file_bytes=1)))
    assert c.planner._merge(0) is not None
    ((_, stats),) = c.run_jobs()
    meta = srv.runtime.metadata
    spans = [(fc.chunk.base_offset, fc.chunk.last_offset) for fc in meta.partition_chunks("hot", 0)]
    assert spans == [(i, i) for i in range(6)]  # one output chunk per input chunk, contiguous
    assert stats.output_files == stats.puts == len(meta.live_files(1))
    assert stats.output_files >= 6
    assert srv.read_all("hot", 0) == before
    assert [r["value"] for r in srv.read_all("hotc", 0)] == ["4", "5"]


def test_output_files_stay_within_the_cap_unless_one_chunk_alone_exceeds_it(srv: RunningServer) -> None:
    srv.create_topic("wide", partitions=4)
    for i in range(8):  # eight flush files, each with a ~2 KiB chunk of every partition
        srv.produce("wide", [{"key": f"k{i}-{p}", "value": "v" * 500, "partition": p % 4} for p in range(16)])
    before = log_of(srv, "wide", 4)
    cap = 5000  # two or three input chunks
    c = compactor(srv, config=RoundConfig(runner=RunnerConfig(max_output_file_bytes=cap)))
    assert c.planner._merge(0) is not None
    ((_, stats),) = c.run_jobs()
    meta = srv.runtime.metadata
    outputs = meta.live_files(1)
    assert stats.output_files == len(outputs) > 1
    for f in outputs:
        chunks = meta.file_chunks([f.file_id])
        assert f.size <= cap or len(chunks) == 1, (f.size, len(chunks))
    # Cut only between input chunks: every partition's log is whole and its chunks contiguous.
    assert log_of(srv, "wide", 4) == before
    for p in range(4):
        spans = [(fc.chunk.base_offset, fc.chunk.last_offset) for fc in meta.partition_chunks("wide", p)]
        assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(spans)), spans


def test_a_job_that_keeps_failing_is_given_up(srv: RunningServer, clock: SkewedClock) -> None:
    srv.create_topic("stuck", **COMPACT)
    produce_updates(srv, "stuck", [{"k": "1"}, {"k": "2"}])
    c = compactor(srv)
    (job,) = c.planner.plan("stuck", force=True)
    meta = srv.runtime.metadata
    lease_ms = c.config.runner.lease_ms
    for _ in range(c.config.max_job_attempts):  # attempts that crashed: leased, never finished
        assert meta.lease_job("crashing-worker", clock.now_ms(), lease_ms) is not None
        clock.advance(lease_ms / 1000 + 1)
    assert c.run_jobs() == []
    assert meta.get_job(job.job_id).state == "failed"
    # Its files are free again: the next round plans and runs a new job.
    result = c.run_once("stuck", force=True)
    assert [stats.outcome for _, stats in result.jobs] == ["committed"]
    assert [r["value"] for r in srv.read_all("stuck", 0)] == ["2"]


class _VirtualSleeps:
    """The server's clock, except that a sleep moves monotonic time on instead of waiting: a throttled job
    then runs at full speed while its clock shows the time the throttle asked for."""

    def __init__(self, base: SkewedClock) -> None:
        self.base = base
        self.slept = 0.0

    def now_ms(self) -> int:
        return self.base.now_ms()

    def monotonic(self) -> float:
        return self.base.monotonic() + self.slept

    def sleep(self, seconds: float) -> None:
        self.slept += seconds

    async def asleep(self, seconds: float) -> None:
        self.slept += seconds


def test_a_read_rate_limit_paces_compaction_by_the_bytes_it_reads(
    srv: RunningServer, clock: SkewedClock
) -> None:
    srv.create_topic("big", partitions=1)
    for i in range(3):  # three flushes of ~1 MiB each
        assert (
            srv.produce("big", [{"key": f"k{i}-{j}", "value": "v" * 1000} for j in range(1000)]).status_code
            == 200
        )
    before = srv.read_all("big", 0)
    clock.advance(60)  # L0's oldest file is past its merge age
    rt = srv.runtime
    paced = _VirtualSleeps(clock)
    rate = 1024 * 1024
    c = CompactionRound(
        rt.store,
        rt.metadata,
        paced,
        random.Random(7),
        owner="test-worker",
        config=RoundConfig(runner=RunnerConfig(max_read_bytes_per_second=rate)),
    )
    assert c.planner._merge(0) is not None
    started = rt.clock.monotonic()
    ((_, stats),) = c.run_jobs()
    real = rt.clock.monotonic() - started
    assert stats.bytes_read > 2.5 * rate  # every input byte: ~3 MiB, one pass (no keys to deduplicate)
    # One second of reading is free (the bucket starts full); the rest is paid at the rate, less any real
    # time that passed meanwhile, which refilled the bucket.
    assert (stats.bytes_read - rate) / rate - real <= paced.slept <= stats.bytes_read / rate
    assert stats.duration_ms >= paced.slept * 1000  # the job's duration includes the waits
    assert srv.read_all("big", 0) == before


@pytest.mark.parametrize("rate", ["1", "1048575", "-1"])
def test_a_read_rate_limit_below_1_mib_is_refused_at_start(rate: str) -> None:
    with pytest.raises(SettingsError, match="STRATA_COMPACTION_MAX_READ_BYTES_PER_SECOND"):
        load_settings(environ={"STRATA_COMPACTION_MAX_READ_BYTES_PER_SECOND": rate})


class _CountingHeartbeats:
    """The server's metadata store, counting the job heartbeats a runner sends."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.heartbeats = 0

    def heartbeat_job(self, *args: Any, **kwargs: Any) -> Any:
        self.heartbeats += 1
        return self.inner.heartbeat_job(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_throttled_job_renews_its_lease_between_chunks(srv: RunningServer, clock: SkewedClock) -> None:
    """One partition of five ~1 MiB chunks at 1 MiB/s takes ~4 s of (virtual) waiting; with a 1.5 s lease
    (renewed every half second) the runner must heartbeat while reading, not only between partitions."""
    srv.create_topic("slow", partitions=1)
    for i in range(5):
        records = [{"key": f"k{i}-{j}", "value": "v" * 1000} for j in range(1000)]
        assert srv.produce("slow", records).status_code == 200
    clock.advance(60)
    rt = srv.runtime
    paced = _VirtualSleeps(clock)
    catalog = _CountingHeartbeats(rt.metadata)
    c = CompactionRound(
        rt.store,
        catalog,  # type: ignore[arg-type]
        paced,
        random.Random(7),
        owner="test-worker",
        config=RoundConfig(runner=RunnerConfig(max_read_bytes_per_second=1024 * 1024, lease_ms=1500)),
    )
    assert c.planner._merge(0) is not None
    ((_, stats),) = c.run_jobs()
    assert stats.error_code is None
    assert paced.slept > 3.0
    assert catalog.heartbeats >= 3  # at least two while reading, plus the one before the commit
