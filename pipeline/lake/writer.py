"""One lake job: bring one topic's Iceberg table up to the topic's last stable offset (or as far as the byte
cap allows), in one snapshot.

The steps, under the table's lease (``LakeStore.lease_lake_table``):
1. load the table, or create it (Iceberg v2, the raw layout of ``table_layout``, the topic's partition
   spec, ``commit.retry.num-retries=0``);
2. read its committed offsets from the current snapshot's summary (``offsets``);
3. plan the read of each partition from there to its LSO, up to the commit's byte cap (``source``); a
   partition the table has never had starts at the log start, or at the LSO with
   ``strata.iceberg.backfill=from_now``;
4. read it a piece at a time (``lake_write_buffer_bytes``), each piece's rows written as data files at
   once (``append``), so that the writer's memory holds one piece whatever the commit's size, and the
   lease extended after each piece;
5. append every data file in one snapshot with the new offsets as its ``strata.offsets``, and commit: data
   and offsets are one snapshot, swapped in by the catalog's compare-and-set;
6. record the outcome in ``lake_tables`` (for display) and release the lease.

Why exactly once. A snapshot names its rows and the offsets they end at together, so whatever the table
holds, the next run starts where its rows end. A writer that crashes before the catalog commit leaves
only unreferenced files; one that crashes after it leaves a committed snapshot that the next run reads.
Two writers (a lease that expired under a slow one) both start from the snapshot they loaded, and the
catalog accepts only the first commit on it: the second gets ``CommitFailedException`` and stops, without
appending again. pyiceberg 0.12 would retry a failed commit by re-applying the append on top of the
winner's snapshot, which would duplicate the rows both read, so lake tables set ``commit.retry.num-retries``
to 0 (and the writer sets it again on a table that lacks it). A run with nothing new commits nothing; a
run whose offsets moved without rows (aborted transactions, compacted holes, ``from_now``'s start)
commits an empty snapshot carrying them.

Typed modes (``typed_writer``): the same read becomes typed rows, appended (with the schema evolution
they need) in the same one transaction; records without a typed row go first to the dead-letter table,
whose own commit is exactly once too (``dead_letters``), or are only counted with ``drop``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from pipeline.lake.append import FileAppend
from pipeline.lake.hooks import CommitHook, NoHook
from pipeline.lake.memory import release, use_system_allocator
from pipeline.lake.offsets import OFFSETS_PROPERTY, committed_offsets, encode_offsets
from pipeline.lake.runs import (
    COMMITTED,
    FAILED,
    LEASED_ELSEWHERE,
    LOST_RACE,
    UP_TO_DATE,
    LakeRun,
    LakeWriterConfig,
    StateRun,
)
from pipeline.lake.source import Slice, read_slice
from pipeline.lake.state_writer import SourceRead, StateChanges, StateWriter, state_table_name
from pipeline.lake.table_layout import dead_letter_schema, partition_spec, raw_rows, raw_schema, to_table_rows
from pipeline.lake.table_properties import check_topic, ensure_no_retry, new_table_properties
from storage.clock import Clock
from storage.errors import LeaseLost, StrataError
from storage.lake_config import ACTION_DLQ, BACKFILL_FROM_NOW, LakeTopicConfig, dead_letter_table
from storage.metadata.base import MetadataStore
from storage.metadata.lake_state import LakeClaim, LakeRunResult
from storage.metadata.rows import TopicInfo
from storage.objectstore.base import ObjectStore

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table, Transaction

    from pipeline.lake.typed_writer import SchemaLookup

log = logging.getLogger("strata.lake")

# What the table holds: raw rows, typed rows, or dead letters (a table without it is a raw one, as every
# table was before typed modes). A topic whose mode changes between raw and typed keeps its table, which
# the writer then refuses rather than mixing layouts.
LAYOUT_PROPERTY = "strata.layout"
RAW, TYPED, DEAD_LETTERS = "raw", "typed", "dead-letter"


def lake_failures() -> tuple[type[BaseException], ...]:
    """The errors a run can meet outside Strata's own (``StrataError``): files and network (OSError,
    Arrow's errors), the catalog's database (SQLAlchemy), pyiceberg's refusals. Each ends the run with its
    message in the table's status; anything else is a bug and propagates."""
    import pyarrow as pa
    from pyiceberg.exceptions import (
        CommitStateUnknownException,
        NoSuchNamespaceError,
        NoSuchTableError,
        ValidationError,
        ValidationException,
    )
    from sqlalchemy.exc import SQLAlchemyError

    from registry.errors import StoreError

    return (
        StrataError,
        StoreError,
        OSError,
        ValueError,
        pa.ArrowException,
        SQLAlchemyError,
        CommitStateUnknownException,
        NoSuchNamespaceError,
        NoSuchTableError,
        ValidationError,
        ValidationException,
    )


class LakeWriter:
    def __init__(
        self,
        metadata: MetadataStore,
        store: ObjectStore,
        catalog: Catalog,
        clock: Clock,
        owner: str,
        config: LakeWriterConfig = LakeWriterConfig(),
        hook: CommitHook | None = None,
        schemas: SchemaLookup | None = None,
    ) -> None:
        """``schemas``: the typed tables' registry, by default the one in ``metadata`` (made on first use).
        pyarrow allocates on the system allocator from here on (``memory``)."""
        use_system_allocator()
        self.metadata = metadata
        self.store = store
        self.catalog = catalog
        self.clock = clock
        self.owner = owner
        self.config = config
        self.hook: CommitHook = hook or NoHook()
        self._schemas = schemas

    def schemas(self) -> SchemaLookup:
        if self._schemas is None:
            from pipeline.lake.typed_writer import registry_schemas

            self._schemas = registry_schemas(self.metadata)
        return self._schemas

    def run(self, info: TopicInfo) -> LakeRun:
        """One job for the topic ``info``: lease, write, record, release."""
        lake = LakeTopicConfig.from_overrides(info.name, info.configs)
        claim = LakeClaim(info.name, lake.table, lake.mode, lake.delete_with_topic, info.created_ms)
        started = self.clock.now_ms()
        leased = self.metadata.lease_lake_table(claim, self.owner, started, self.config.lease_ms)
        if leased is None:
            return LakeRun(info.name, LEASED_ELSEWHERE)
        source: SourceRead | None = None
        try:
            run, source = self._write(info, lake)
        except lake_failures() as exc:
            message = exc.message if isinstance(exc, StrataError) else f"{type(exc).__name__}: {exc}"
            log.warning("lake writer of %s failed: %s", info.name, message)
            run = LakeRun(info.name, FAILED, lag_records=leased.lag_records, error=message)
        if lake.upsert:
            run = self._write_state(info, lake, source, run)
        committed = run.outcome in (COMMITTED, UP_TO_DATE, LOST_RACE)
        result = LakeRunResult(
            dict(run.offsets) if committed else None,
            run.snapshot_id,
            self.clock.now_ms() if run.outcome == COMMITTED else None,
            run.lag_records,
            run.error,
            request_seen=leased.commit_requested,
            started_ms=started,
        )
        try:
            self.metadata.finish_lake_run(info.name, self.owner, self.clock.now_ms(), result)
        except LeaseLost:
            log.warning("lake writer of %s lost its lease; its status was not recorded", info.name)
        return run

    def _write_state(
        self, info: TopicInfo, lake: LakeTopicConfig, source: SourceRead | None, run: LakeRun
    ) -> LakeRun:
        """The state table's commit (``state_writer``), after the topic's table's, under the same lease;
        its failure is reported with the run's and does not undo the topic's table's commit."""
        writer = StateWriter(
            self.metadata, self.store, self.catalog, self.clock, self.owner, self.config, self.hook
        )
        try:
            state = writer.run(info, lake, source)
        except lake_failures() as exc:
            message = exc.message if isinstance(exc, StrataError) else f"{type(exc).__name__}: {exc}"
            state = StateRun(state_table_name(lake.table), FAILED, error=message)
        (log.warning if state.outcome == FAILED else log.info)(
            "lake writer of %s: %s", info.name, state.describe()
        )
        error = run.error
        if state.error is not None:
            error = "; ".join(e for e in (run.error, f"{state.table}: {state.error}") if e)
        return replace(run, state=state, error=error)

    def _write(self, info: TopicInfo, lake: LakeTopicConfig) -> tuple[LakeRun, SourceRead | None]:
        table = self.load_or_create(info, lake)
        offsets, snapshot_id = committed_offsets(table)
        # A partition the table has never had starts at the log start (left out), or at the LSO (None).
        starts: dict[int, int | None] = dict(offsets)
        if lake.backfill == BACKFILL_FROM_NOW:
            for partition in range(info.partitions):
                starts.setdefault(partition, None)
        config = self.config
        read = read_slice(
            self.metadata,
            self.store,
            info.name,
            starts,
            config.max_bytes_per_commit,
            config.write_buffer_bytes,
        )
        new_offsets = {**offsets, **read.end}
        lag = _lag(read)
        gap, gap_records = _gap(offsets, read)
        if gap is not None:
            log.warning("lake table of %s: %s", info.name, gap)
        changes = StateChanges() if lake.upsert else None
        if new_offsets == offsets:
            return LakeRun(info.name, UP_TO_DATE, offsets, snapshot_id, lag_records=lag), _source(
                starts, read, changes
            )
        transaction = table.transaction()
        files = FileAppend(table, transaction)
        pieces = self._pieces(info, read, changes)
        invalid = 0
        if lake.lake_mode.typed:
            typed = self._typed(info, lake, table, pieces, new_offsets, transaction, files)
            if isinstance(typed, LakeRun):
                return replace(typed, lag_records=lag), _source(starts, read, changes)
            invalid = typed
        else:
            schema = table.schema()
            for piece in pieces:
                rows = to_table_rows(piece, schema)
                piece.clear()  # the decoded batches go before the write: it copies the rows twice more
                files.write(rows)
                del rows
        files.append({OFFSETS_PROPERTY: encode_offsets(new_offsets)})
        source = _source(starts, read, changes)
        # A writer that lost its lease stops here: another one has the table now. (Leases are judged by
        # each writer's clock, so two may still overlap: the catalog's compare-and-set decides then.)
        self._heartbeat(info)
        self.hook.before_commit(info.name, table)
        from pyiceberg.exceptions import CommitFailedException

        try:
            table = transaction.commit_transaction()
        except CommitFailedException as exc:
            # Another writer committed first: never append again on top of it. The table's offsets are
            # what it now says; the next run goes on from there.
            return replace(self._lost_race(info, table, exc), lag_records=lag), source
        self.hook.after_commit(info.name, table)
        snapshot = table.current_snapshot()
        run = LakeRun(
            info.name,
            COMMITTED,
            new_offsets,
            None if snapshot is None else snapshot.snapshot_id,
            rows=files.rows,
            chunk_bytes=read.chunk_bytes,
            lag_records=lag,
            error=gap,
            invalid_records=invalid,
            gap_records=gap_records,
        )
        return run, source

    def _pieces(
        self, info: TopicInfo, read: Slice, changes: StateChanges | None
    ) -> Iterator[list[pa.RecordBatch]]:
        """The slice's pieces in turn, each also reduced into the state's ``changes`` (when the topic has a
        state table); after each, its memory given back (``memory.release``) and the lease extended: a
        commit of many pieces may outlast one lease."""
        for piece in read.pieces(self.store):
            if changes is not None:
                changes.add(piece)
            yield piece
            release()
            self._heartbeat(info)

    def _heartbeat(self, info: TopicInfo) -> None:
        self.metadata.heartbeat_lake_table(info.name, self.owner, self.clock.now_ms(), self.config.lease_ms)

    def _typed(
        self,
        info: TopicInfo,
        lake: LakeTopicConfig,
        table: Table,
        pieces: Iterator[list[pa.RecordBatch]],
        new_offsets: dict[int, int],
        transaction: Transaction,
        files: FileAppend,
    ) -> int | LakeRun:
        """A typed commit's steps into ``transaction`` and ``files``, a piece at a time, its dead letters
        committed first (``dead_letters``): the records refused, or the run's end when the dead-letter
        commit lost a race."""
        from pyiceberg.exceptions import CommitFailedException

        from pipeline.lake.dead_letters import DeadLetterAppend
        from pipeline.lake.typed_writer import decoding_for, plan_piece, table_columns

        decoding = decoding_for(self.schemas(), lake.lake_mode, info.name)
        columns = table_columns(table)
        letters: DeadLetterAppend | None = None
        refused = 0
        for piece in pieces:
            raw = raw_rows(piece)
            piece.clear()  # the sorted rows are what the plan needs
            plan = plan_piece(columns, raw, self.schemas(), decoding)
            del raw
            plan.apply(transaction, files)
            columns = plan.columns
            refused += plan.dead_letters.num_rows
            if plan.dead_letters.num_rows and lake.invalid_record_action == ACTION_DLQ:
                if letters is None:
                    dlq = self._open(info, dead_letter_table(lake.table), DEAD_LETTERS, lake)
                    letters = DeadLetterAppend(dlq, new_offsets)
                letters.add(plan.dead_letters)
        if letters is not None:
            self._heartbeat(info)
            try:
                letters.commit()
            except CommitFailedException as exc:
                return self._lost_race(info, table, exc)
        if refused:
            log.info("lake table of %s: %d records have no typed row", info.name, refused)
        return refused

    def _lost_race(self, info: TopicInfo, table: Table, exc: Exception) -> LakeRun:
        table.refresh()
        theirs, theirs_id = committed_offsets(table)
        log.info("lake writer of %s lost a commit race (%s); the table is at %s", info.name, exc, theirs)
        return LakeRun(info.name, LOST_RACE, theirs, theirs_id)

    def load_or_create(self, info: TopicInfo, lake: LakeTopicConfig) -> Table:
        """The topic's table: loaded, or created as the topic's configs say. Raises StrataError when the
        table holds another topic (another name, or an earlier topic of the same name), or another layout."""
        return self._open(info, lake.table, TYPED if lake.lake_mode.typed else RAW, lake)

    def _open(self, info: TopicInfo, identifier: str, layout: str, lake: LakeTopicConfig) -> Table:
        from pyiceberg.catalog import Catalog
        from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

        try:
            table = self.catalog.load_table(identifier)
        except NoSuchTableError:
            self.catalog.create_namespace_if_not_exists(Catalog.namespace_from(identifier))
            schema, spec = _new_layout(layout, lake)
            properties = {**new_table_properties(info), LAYOUT_PROPERTY: layout}
            try:
                table = self.catalog.create_table(
                    identifier, schema, partition_spec=spec, properties=properties
                )
            except TableAlreadyExistsError:  # another writer created it first
                table = self.catalog.load_table(identifier)
        check_topic(table, identifier, info)
        held = table.properties.get(LAYOUT_PROPERTY, RAW)
        if held != layout:
            raise StrataError(
                f"the Iceberg table {identifier} holds {held} rows; strata.iceberg.mode={lake.mode} writes"
                f" {layout} rows: drop the table, or set strata.iceberg.table to another name"
            )
        return ensure_no_retry(table)


def _new_layout(layout: str, lake: LakeTopicConfig) -> tuple[Schema, PartitionSpec]:
    """A new table's schema and partition spec (the topic's spec over the layout's columns)."""
    if layout == TYPED:
        from pipeline.lake.typed_writer import typed_schema

        return typed_schema(lake.partition_spec)
    schema = raw_schema() if layout == RAW else dead_letter_schema()
    return schema, partition_spec(schema, lake.partition_spec)


def _source(starts: Mapping[int, int | None], read: Slice, changes: StateChanges | None) -> SourceRead | None:
    """What the state writer may reuse of a read whose pieces were all read (None without a state)."""
    return None if changes is None else SourceRead(starts, read, changes.table())


def _lag(read: Slice) -> int:
    """Records (offsets) between the table's end and the LSO, after the commit."""
    return sum(max(0, read.stable[p] - end) for p, end in read.end.items())


def _gap(offsets: dict[int, int], read: Slice) -> tuple[str | None, int]:
    """What retention (or DeleteRecords) deleted before the table had it: the table's offsets below the
    log starts the read began at, and how many offsets that is. Those records are missing from the table;
    the status says so."""
    holes = {p: (o, read.start[p]) for p, o in offsets.items() if p in read.start and read.start[p] > o}
    if not holes:
        return None, 0
    missing = ", ".join(f"partition {p} [{a}, {b})" for p, (a, b) in sorted(holes.items()))
    return f"records deleted before the table had them: {missing}", sum(b - a for a, b in holes.values())
