"""One attempt at one compaction job (``JobRun``): two forward-only GET streams per input file.

For every topic-partition of the job, in (topic, partition) order:
- **Pass 1** (compacted topics only) reads the partition's dirty, cleanable chunks through the file's
  pass-1 stream and puts key-hash -> offset into the bounded offset map. It starts at the partition's
  ``cleaned_offset`` (records below it are already unique among themselves) and stops at the first chunk
  newer than ``min.compaction.lag.ms``, or where the map fills (Kafka's partial cleaning: the rest stays
  dirty for the next round, and rounds converge).
- **Pass 2** reads every chunk of the partition through the file's pass-2 stream. A gap-free run of a
  topic that is not deduplicated is copied batch by batch (``_copy_batch``); otherwise each batch keeps the
  records that ``retain_mask`` keeps, byte for byte, at their original offsets (``_filter_batch``). The
  offsets a chunk no longer holds become holes, recorded as a roaring bitmap in the output footer
  (planner/outputs.py). The map is then cleared.

Both streams of a file open at its first byte and only move forward, so a job costs at most two GETs per
input file (one when nothing in the file is compacted) and one PUT per output file, whatever the partition
count. Job chunks of one partition that are adjacent in the partition's log become one output chunk;
runs separated by chunks outside the job stay separate chunks, so chunk offset ranges never overlap. In a
compacted partition a run is also cut where the cleaned offset (before the job, and the one it commits)
falls between two chunks, so that no chunk joins cleaned records with dirty ones (``_split_at``).

Commit is compare-and-set (``commit_compaction``): if any input chunk changed meanwhile (retention, a topic
deletion, another job), the commit raises ``CommitConflict`` and writes nothing; the runner
(planner/runner.py) decides what an error means for the job.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.jobs import JobSpec
from planner.marker_sweep import MarkerSweep
from planner.offset_map import KeyHasher, OffsetMap
from planner.outputs import OutputFiles, Piece
from planner.phases import PhaseHook, no_phase_hook
from planner.retain import retain_mask
from planner.stats import JobOutcome, JobStats
from planner.streams import ForwardReader
from planner.throttle import ReadThrottle
from planner.txn_filter import TxnFilter
from storage import fileformat, records
from storage.clock import Clock
from storage.errors import StrataError, UnknownTopic
from storage.metadata.base import CompactionCatalog
from storage.metadata.rows import ChunkRow, CleanedUpTo, FileChunk, Job
from storage.objectstore.base import ObjectStore
from storage.records.codec import COMPRESSION_MASK, TRANSACTIONAL
from storage.records.columns import scan_columns
from storage.topic_config import TopicConfig

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
# Pass 1 inserts keys in groups of this many (one C loop per group, bounded memory).
PASS1_BATCH = 16_384


@dataclass(frozen=True, slots=True)
class JobContext:
    """What one attempt needs to know about the runner that makes it."""

    owner: str  # the lease holder's name: heartbeats and the commit are refused for anyone else
    lease_ms: int
    max_output_file_bytes: int
    rng: random.Random  # key-hash secrets and output object keys
    throttle: ReadThrottle  # the runner's read rate, shared by all its jobs


@dataclass(frozen=True, slots=True)
class _Retention:
    """Pass 2's keep rule for one run of a deduplicated partition (see ``retain_mask``)."""

    map_end: int  # the last offset the offset map covers (-1: none)
    can_drop_tombstones: bool  # the job holds the partition's log from its start
    horizon: int  # the delete horizon set on tombstones kept for the first time


class JobRun:
    """One attempt at one job."""

    def __init__(
        self,
        context: JobContext,
        store: ObjectStore,
        metadata: CompactionCatalog,
        clock: Clock,
        offset_map: OffsetMap,
        job: Job,
        spec: JobSpec,
        on_phase: PhaseHook = no_phase_hook,
    ) -> None:
        self.context = context
        self.job = job
        self.spec = spec
        self.store = store
        self.metadata = metadata
        self.clock = clock
        self.map = offset_map
        self.on_phase = on_phase
        self.hasher = KeyHasher.random(context.rng)  # a fresh secret per job: collisions can't be crafted
        self.now_ms = self.clock.now_ms()
        self.started = self.clock.monotonic()
        self.stats = JobStats(input_files=len(spec.inputs), owner=context.owner)
        self.pass1: dict[int, ForwardReader] = {}
        self.pass2: dict[int, ForwardReader] = {}
        self.out = OutputFiles(
            store,
            clock,
            context.rng,
            spec.output_level,
            context.max_output_file_bytes,
            self.stats,
            on_phase,
        )
        self._cleaned_offsets: dict[str, dict[int, int]] = {}
        self._lease_renewed_at = self.clock.monotonic()
        self.reading: ChunkRow | None = None
        # The partition's markers, while a clean holding its whole log walks it (planner/marker_sweep.py).
        self.sweep: MarkerSweep | None = None

    # --- orchestration -----------------------------------------------------------------------------------
    def execute(self) -> None:
        chunks = self.metadata.file_chunks(self.spec.file_ids)
        keys = {f.file_id: f.object_key for f in self.spec.inputs}
        ends: dict[int, int] = {}
        for fc in chunks:
            ends[fc.file_id] = max(ends.get(fc.file_id, 0), fc.chunk.position + fc.chunk.length)
        throttle = self.context.throttle
        for file_id, end in ends.items():
            self.pass1[file_id] = ForwardReader(self.store, keys[file_id], end, throttle)
            self.pass2[file_id] = ForwardReader(self.store, keys[file_id], end, throttle)
        by_partition: dict[tuple[str, int], list[FileChunk]] = {}
        for fc in chunks:
            by_partition.setdefault((fc.chunk.topic, fc.chunk.partition), []).append(fc)
        configs: dict[str, TopicConfig | None] = {}
        cleaned: list[CleanedUpTo] = []
        for tp in sorted(by_partition):
            self._keep_lease()
            topic, partition = tp
            if topic not in configs:
                configs[topic] = self._config(topic)
            part_chunks = sorted(by_partition[tp], key=lambda fc: fc.chunk.base_offset)
            done = self._partition(topic, partition, part_chunks, configs[topic])
            if done is not None:
                cleaned.append(done)
        self.out.seal_all()
        self._collect_counters()
        self._keep_lease(force=True)
        input_ids = [fc.chunk.chunk_id for fc in chunks]
        self._stamp_duration()
        self.metadata.commit_compaction(
            self.job.job_id,
            self.context.owner,
            input_ids,
            self.out.outputs,
            cleaned,
            self.clock.now_ms(),
            self.stats.report(JobOutcome.COMMITTED),  # stored by the commit's own transaction
        )
        self.stats.outcome = JobOutcome.COMMITTED

    def end(self, outcome: JobOutcome, error: StrataError) -> None:
        """Record why the attempt ended without a commit."""
        self.stats.fail(outcome, error.code, error.message)
        self._stamp_duration()

    def _stamp_duration(self) -> None:
        self.stats.duration_ms = int((self.clock.monotonic() - self.started) * 1000)

    def close(self) -> None:
        for reader in (*self.pass1.values(), *self.pass2.values()):
            reader.close()
        self._collect_counters()

    def _collect_counters(self) -> None:
        # Counted by the job itself, not from the store's counters: in one process an agent shares them,
        # and its requests must not show up in the job's figures. (Retries of a request are not counted
        # here; the store's counters, exported as metrics, see those.)
        readers = (*self.pass1.values(), *self.pass2.values())
        self.stats.bytes_read = sum(r.bytes_read for r in readers)
        self.stats.gets = sum(1 for r in readers if r.opened or r.closed)

    def _config(self, topic: str) -> TopicConfig | None:
        try:
            return TopicConfig.from_overrides(self.metadata.get_topic(topic).configs)
        except UnknownTopic:
            return None  # deleted meanwhile: its chunks are copied and the commit will conflict

    def _keep_lease(self, force: bool = False) -> None:
        interval = self.context.lease_ms / 3000  # renew at a third of the lease, in seconds
        if not force and self.clock.monotonic() - self._lease_renewed_at < interval:
            return
        # Raises LeaseLost when another runner holds the job now: this attempt must stop and not commit.
        self.metadata.heartbeat_job(
            self.job.job_id, self.context.owner, self.clock.now_ms(), self.context.lease_ms
        )
        self._lease_renewed_at = self.clock.monotonic()

    # --- one partition -----------------------------------------------------------------------------------
    def _partition(
        self, topic: str, partition: int, chunks: list[FileChunk], config: TopicConfig | None
    ) -> CleanedUpTo | None:
        self.stats.partitions += 1
        self.sweep = None
        dedup = config is not None and config.compacted
        runs, covers_prefix, cleaned_offset = self._runs(topic, partition, chunks, dedup)
        map_end = -1
        txns = TxnFilter.load(self.metadata, topic, partition) if dedup else None
        if dedup:
            assert config is not None
            assert txns is not None
            with self.on_phase("pass1"):
                map_end = self._pass1(chunks, cleaned_offset if covers_prefix else 0, config, txns)
            self.stats.partitions_deduplicated += 1
            if covers_prefix and map_end >= 0:
                runs = _split_at(runs, map_end + 1)  # the new cleaned offset: see _split_at
                self.sweep = MarkerSweep(
                    self.metadata, topic, partition, map_end, self.now_ms, config.delete_retention_ms
                )
        for run in runs:
            with self.on_phase("pass2"):
                self._pass2(topic, partition, run, map_end, covers_prefix, config, txns)
        self.map.clear()
        sweep, self.sweep = self.sweep, None
        if sweep is not None:
            horizons, dropped = sweep.finish()
            return CleanedUpTo(topic, partition, map_end + 1, horizons, sweep.horizon_ms, dropped)
        return None

    def _runs(
        self, topic: str, partition: int, chunks: list[FileChunk], dedup: bool
    ) -> tuple[list[list[FileChunk]], bool, int]:
        """Split the job's chunks into runs adjacent in the partition's log; does the job hold its prefix?

        Returns the runs, whether the job holds the partition's whole log up to its last chunk, and the
        partition's cleaned offset (0 unless ``dedup``). A compacted partition's runs are also split where
        the cleaned offset falls between two chunks (``_split_at``).
        """
        if not dedup and all(_dense(c.chunk) for c in chunks) and _contiguous(chunks):
            return [chunks], False, 0
        whole = self.metadata.partition_chunks(topic, partition)
        order = {fc.chunk.chunk_id: i for i, fc in enumerate(whole)}
        runs: list[list[FileChunk]] = []
        previous = -2
        for fc in chunks:
            index = order.get(fc.chunk.chunk_id, -10)
            if index != previous + 1 or not runs:
                runs.append([])
            runs[-1].append(fc)
            previous = index
        covers_prefix = bool(chunks) and order.get(chunks[0].chunk.chunk_id) == 0 and len(runs) == 1
        cleaned_offset = 0
        if dedup:
            if topic not in self._cleaned_offsets:  # one query per topic, not per partition
                self._cleaned_offsets[topic] = {
                    s.partition: s.cleaned_offset for s in self.metadata.partition_stats(topic)
                }
            cleaned_offset = self._cleaned_offsets[topic].get(partition, 0)
            runs = _split_at(runs, cleaned_offset)
        return runs, covers_prefix, cleaned_offset

    def _read(self, readers: dict[int, ForwardReader], fc: FileChunk) -> bytes:
        # Renewed per chunk, not only per partition: with a read rate limit one partition's chunks can take
        # longer than the lease (a partition of 100 MiB at 1 MiB/s: 100 s against 60 s). One chunk must
        # still fit in the lease, which MIN_BYTES_PER_SECOND keeps true for chunks of the default files.
        self._keep_lease()
        # The chunk being read: if its bytes fail a check, here or while its records are scanned, the
        # job reports this range as damaged (JobRunner.run).
        self.reading = fc.chunk
        data = readers[fc.file_id].read(fc.chunk.position, fc.chunk.length)
        fileformat.verify_chunk(data, fc.chunk.crc, object_key=fc.chunk.object_key)
        return data

    def _pass1(self, chunks: list[FileChunk], start: int, config: TopicConfig, txns: TxnFilter) -> int:
        """Fill the map from ``start`` up to the last stable offset, aborted transactions left out
        (planner/txn_filter.py); returns the last offset it covers (-1: none)."""
        started = self.clock.monotonic()
        # Without a minimum lag every record is cleanable, even one stamped ahead of this worker's clock
        # (CreateTime comes from producers): checking it would stall cleaning behind that chunk.
        cutoff = self.now_ms - config.min_compaction_lag_ms if config.min_compaction_lag_ms > 0 else None
        offset_map = self.map
        map_end = -1
        try:
            for fc in chunks:
                chunk = fc.chunk
                if cutoff is not None and chunk.max_timestamp > cutoff:
                    break  # records newer than min.compaction.lag.ms are never cleaned
                if chunk.last_offset < start:
                    continue
                data = self._read(self.pass1, fc)
                self.stats.pass1_bytes += len(data)
                # Only hashes and offsets are kept, PASS1_BATCH at a time: pass 1's memory beyond the map
                # stays small whatever the chunk size.
                h1: list[U64] = []
                h2: list[U64] = []
                key_offsets: list[I64] = []
                pending = 0
                last_seen = -1
                stable = False
                for header, view in records.iter_batches(data, verify_crc=False):
                    base = chunk.base_offset + header.base_offset
                    if base >= txns.stable:
                        stable = True  # an open transaction's records, or later ones: never cleaned
                        break
                    if txns.aborted_batch(header, base):
                        if base + header.last_offset_delta >= start:  # decided, but not a value
                            last_seen = base + header.last_offset_delta
                        continue
                    cols = scan_columns(view, header, chunk.base_offset, self.hasher.key_a, self.hasher.key_b)
                    wanted = cols.offsets >= start
                    if not wanted.any():
                        continue
                    last_seen = int(cols.offsets[-1])  # offsets increase within a batch
                    keyed = wanted & cols.keyed
                    h1.append(cols.h1[keyed])
                    h2.append(cols.h2[keyed])
                    key_offsets.append(cols.offsets[keyed])
                    pending += int(keyed.sum())
                    if pending >= PASS1_BATCH:
                        full_at = self._put(h1, h2, key_offsets)
                        if full_at is not None:
                            return full_at
                        h1, h2, key_offsets, pending = [], [], [], 0
                full_at = self._put(h1, h2, key_offsets)
                if full_at is not None:
                    return full_at
                if last_seen >= 0:
                    map_end = last_seen
                if stable:
                    break
            return map_end
        finally:
            self.stats.map_utilization = max(self.stats.map_utilization, offset_map.utilization)
            self.stats.pass1_seconds += self.clock.monotonic() - started

    def _put(self, h1: list[U64], h2: list[U64], offsets: list[I64]) -> int | None:
        """Put key hashes in the map; if it fills, the last offset it covers (Kafka's partial cleaning)."""
        if not offsets:
            return None
        all_offsets = np.concatenate(offsets)
        stored = self.map.put_words(np.concatenate(h1), np.concatenate(h2), all_offsets)
        if stored == len(all_offsets):
            return None
        self.stats.partial_partitions += 1
        return int(all_offsets[stored]) - 1  # everything before the first record that did not fit

    def _pass2(
        self,
        topic: str,
        partition: int,
        run: list[FileChunk],
        map_end: int,
        can_drop_tombstones: bool,
        config: TopicConfig | None,
        txns: TxnFilter | None,
    ) -> None:
        """Copy or filter ``run`` into output pieces. ``txns``: the partition is deduplicated (a compacted
        topic's), and its aborted transactions' batches are dropped."""
        started = self.clock.monotonic()
        dedup = txns is not None
        dense = not dedup and all(_dense(fc.chunk) for fc in run) and _contiguous(run)
        piece = Piece(run[0].chunk.base_offset)
        horizon = self.now_ms + (config.delete_retention_ms if config is not None else 0)
        rule = _Retention(map_end, can_drop_tombstones, horizon) if dedup else None
        cap = self.context.max_output_file_bytes
        for i, fc in enumerate(run):
            chunk = fc.chunk
            if i and piece.buf and len(piece.buf) + chunk.length > cap:
                # Cut before a chunk that could take the piece past the cap (what it keeps of the chunk is at
                # most the chunk), between input chunks so that offset spans stay contiguous.
                self.out.emit(topic, partition, piece, run[i - 1].chunk.last_offset, dense, config)
                piece = Piece(chunk.base_offset)
            data = self._read(self.pass2, fc)
            self.stats.pass2_bytes += len(data)
            self.stats.records_in += chunk.record_count
            self.stats.count_in(topic, chunk.record_count, len(data))
            for header, view in records.iter_batches(data, verify_crc=False):
                if self.sweep is not None:
                    self.sweep.reach(chunk.base_offset + header.base_offset)
                if dense:
                    _copy_batch(piece, view, header, chunk)
                elif txns is None or not txns.aborted_batch(header, chunk.base_offset + header.base_offset):
                    self._filter_batch(piece, view, header, chunk, rule, config)
            if dense:
                piece.min_ts = min(piece.min_ts, chunk.min_timestamp)
                piece.max_ts = max(piece.max_ts, chunk.max_timestamp)
            # Bound memory: a long run becomes several output chunks, cut between input chunks so their
            # offset spans stay contiguous and never overlap. (Only an input chunk as large as the cap by
            # itself, or one that re-encoding grew, gets here: the cut above comes first.)
            if len(piece.buf) >= cap and i + 1 < len(run):
                self.out.emit(topic, partition, piece, chunk.last_offset, dense, config)
                piece = Piece(run[i + 1].chunk.base_offset)
        self.out.emit(topic, partition, piece, run[-1].chunk.last_offset, dense, config)
        self.stats.pass2_seconds += self.clock.monotonic() - started

    def _filter_batch(
        self,
        piece: Piece,
        view: memoryview,
        header: records.BatchHeader,
        chunk: ChunkRow,
        rule: _Retention | None,
        config: TopicConfig | None,
    ) -> None:
        """Append the batch's kept records to ``piece``: the latest of each key under ``rule`` (every record
        without one, for a run that is only merged), re-framed at their original offsets. A compressed batch
        that loses records is compressed again in its codec at the topic's level for it (``config``'s; the
        codec's default for a topic deleted meanwhile, whose output the commit will refuse anyway)."""
        cols = scan_columns(view, header, chunk.base_offset, self.hasher.key_a, self.hasher.key_b)
        if rule is not None:
            latest = np.full(len(cols.offsets), -1, dtype=np.int64)
            latest[cols.keyed] = self.map.get_words(cols.h1[cols.keyed], cols.h2[cols.keyed])
            keep = retain_mask(
                cols.offsets,
                cols.keyed,
                cols.tombstone,
                latest,
                rule.map_end,
                header.delete_horizon_ms,
                self.now_ms,
                rule.can_drop_tombstones,
            )
            # Tombstones removed with no later record of their key: dropped at their horizon.
            self.stats.tombstones_removed += int((~keep & cols.tombstone & (latest <= cols.offsets)).sum())
        else:
            keep = np.ones(len(cols.offsets), dtype=np.bool_)
        if not keep.any():
            return
        if self.sweep is not None and header.attributes & TRANSACTIONAL:
            self.sweep.kept(header.producer_id)
        kept_offsets = cols.offsets[keep]
        kept_timestamps = cols.timestamps[keep]
        new_horizon = None
        if rule is not None and header.delete_horizon_ms is None and bool(cols.tombstone[keep].any()):
            new_horizon = rule.horizon  # first time these tombstones are kept: start their clock
        piece.buf += records.filter_ranges(
            view,
            header,
            kept_offsets.tolist(),
            int(kept_timestamps.max()),
            list(zip(cols.starts[keep].tolist(), cols.ends[keep].tolist(), strict=True)),
            offset_base=chunk.base_offset,
            base_offset=chunk.base_offset + header.base_offset - piece.base,
            delete_horizon_ms=new_horizon,
            level=None if config is None else config.compression_level(header.attributes & COMPRESSION_MASK),
        )
        piece.present.update((kept_offsets - piece.base).tolist())
        piece.count += len(kept_offsets)
        piece.min_ts = min(piece.min_ts, int(kept_timestamps.min()))
        piece.max_ts = max(piece.max_ts, int(kept_timestamps.max()))


def _copy_batch(piece: Piece, view: memoryview, header: records.BatchHeader, chunk: ChunkRow) -> None:
    """Plain merge of a gap-free run: copy the batch, move its base to the new chunk."""
    position = len(piece.buf)
    piece.buf += view
    records.set_base_offset(piece.buf, position, chunk.base_offset + header.base_offset - piece.base)
    piece.count += header.records_count


def _split_at(runs: list[list[FileChunk]], boundary: int) -> list[list[FileChunk]]:
    """Cut runs between two chunks where ``boundary`` (a cleaned offset) falls: before it, after it.

    So no output chunk joins cleaned records with dirty ones, and the planner's dirty figures (the bytes,
    records and oldest record of chunks at or after the cleaned offset) describe the dirty records only.
    A joined chunk would count as dirty: its cleaned bytes would inflate the dirty ratio, and its cleaned
    records, often old, would look past max.compaction.lag.ms, so the whole log would be cleaned again
    long before either threshold. (Only a chunk that itself spans the boundary, where a full offset map
    stopped pass 1, still holds both; the next clean goes on from there.)
    """
    out: list[list[FileChunk]] = []
    for run in runs:
        start = 0
        for i in range(1, len(run)):
            if run[i - 1].chunk.last_offset < boundary <= run[i].chunk.last_offset:
                out.append(run[start:i])
                start = i
        out.append(run[start:])
    return out


def _dense(chunk: ChunkRow) -> bool:
    return not chunk.has_holes and chunk.record_count == chunk.last_offset - chunk.base_offset + 1


def _contiguous(chunks: Sequence[FileChunk]) -> bool:
    return all(b.chunk.base_offset == a.chunk.last_offset + 1 for a, b in itertools.pairwise(chunks))
