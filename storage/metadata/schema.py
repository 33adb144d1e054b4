"""The metadata schema and its migrations, one ordered list per SQL dialect.

``schema_version`` holds one row per applied migration. ``migrate`` runs inside one write transaction
that first takes a lock every starting process contends for (PostgreSQL: a transaction-scoped advisory
lock keyed by the current schema; SQLite: the ``BEGIN IMMEDIATE`` the backend already opened), then
applies the migrations newer than the highest recorded version. DDL is transactional in both dialects, so
two processes starting at once apply each migration exactly once and a crash leaves either all of a
migration or none of it.

Rules for adding a migration: append, never edit an applied one; keep the version numbers of the two
dialects in step, so one number means one logical schema whatever the backend.

Columns named after the architecture's ``partition`` and ``offset`` are spelled ``partition_id`` and
``*_offset``: both words are reserved or special in one of the dialects, and quoting them everywhere is
a trap for the next person writing a query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from storage.errors import SettingsError
from storage.metadata.schema_transactions import v9, v10

if TYPE_CHECKING:
    from storage.metadata.sql.core import Tx


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Types:
    """The few places where the dialects' DDL differs."""

    id_pk: str  # a never-reused, database-assigned integer key
    big: str  # offsets, sizes, millisecond timestamps, CRC-32C (unsigned 32-bit)
    small: str  # partition numbers, levels, counts
    boolean: str
    false: str
    table_options: str


# SQLite: AUTOINCREMENT guarantees a rowid is never handed out twice, even after the highest row is
# deleted. Compaction compares chunk ids to decide whether its inputs are still live, so a reused id
# would be an ABA bug. STRICT makes SQLite reject a value of the wrong type instead of storing it.
_SQLITE = _Types(
    id_pk="INTEGER PRIMARY KEY AUTOINCREMENT",
    big="INTEGER",
    small="INTEGER",
    boolean="INTEGER",
    false="0",
    table_options=" STRICT",
)

# PostgreSQL: identity columns come from a sequence, which never hands out a value twice.
_POSTGRES = _Types(
    id_pk="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    big="BIGINT",
    small="INTEGER",
    boolean="BOOLEAN",
    false="FALSE",
    table_options="",
)


def _v1(t: _Types) -> tuple[str, ...]:
    return _v1_log(t) + _v1_work(t)


def _v1_log(t: _Types) -> tuple[str, ...]:
    """Topics, partitions, files and their chunks: which bytes are live and what offsets they hold."""
    return (
        f"""CREATE TABLE topics (
            name TEXT PRIMARY KEY,
            partitions {t.small} NOT NULL CHECK (partitions > 0),
            configs TEXT NOT NULL,
            created_ms {t.big} NOT NULL
        ){t.table_options}""",
        # One row per partition; exists exactly when its topic does (same transactions). next_offset is
        # the high watermark and only grows, under the row lock of the committing transaction.
        f"""CREATE TABLE partitions (
            topic TEXT NOT NULL REFERENCES topics (name),
            partition_id {t.small} NOT NULL CHECK (partition_id >= 0),
            next_offset {t.big} NOT NULL,
            log_start_offset {t.big} NOT NULL,
            PRIMARY KEY (topic, partition_id),
            CHECK (0 <= log_start_offset AND log_start_offset <= next_offset)
        ){t.table_options}""",
        f"""CREATE TABLE files (
            file_id {t.id_pk},
            object_key TEXT NOT NULL UNIQUE,
            size {t.big} NOT NULL,
            level {t.small} NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('live', 'obsolete')),
            created_ms {t.big} NOT NULL,
            obsolete_since_ms {t.big},
            CHECK ((state = 'obsolete') = (obsolete_since_ms IS NOT NULL))
        ){t.table_options}""",
        # Garbage collection scans obsolete files by age.
        "CREATE INDEX files_by_state ON files (state, obsolete_since_ms)",
        # A chunk row exists exactly while its records are live. Within a partition the offset ranges
        # [base_offset, last_offset] of the rows never overlap, so ordering by last_offset is ordering by
        # base_offset and the read path can use chunks_by_offset for both the filter and the order.
        f"""CREATE TABLE chunks (
            chunk_id {t.id_pk},
            topic TEXT NOT NULL,
            partition_id {t.small} NOT NULL,
            base_offset {t.big} NOT NULL,
            last_offset {t.big} NOT NULL,
            record_count {t.big} NOT NULL CHECK (record_count > 0),
            file_id {t.big} NOT NULL REFERENCES files (file_id),
            position {t.big} NOT NULL,
            length {t.big} NOT NULL,
            min_timestamp {t.big} NOT NULL,
            max_timestamp {t.big} NOT NULL,
            crc {t.big} NOT NULL,
            has_holes {t.boolean} NOT NULL DEFAULT {t.false},
            CHECK (base_offset >= 0 AND last_offset >= base_offset)
        ){t.table_options}""",
        "CREATE INDEX chunks_by_offset ON chunks (topic, partition_id, last_offset)",
        "CREATE INDEX chunks_by_file ON chunks (file_id)",
    )


def _v1_work(t: _Types) -> tuple[str, ...]:
    """Jobs, idempotency keys and consumer group offsets."""
    return (
        # Compaction and retention work (the planner writes rows; workers lease them).
        f"""CREATE TABLE jobs (
            job_id {t.id_pk},
            kind TEXT NOT NULL,
            spec TEXT NOT NULL,
            state TEXT NOT NULL,
            lease_owner TEXT,
            lease_expires_ms {t.big},
            attempts {t.small} NOT NULL DEFAULT 0,
            created_ms {t.big} NOT NULL,
            updated_ms {t.big} NOT NULL
        ){t.table_options}""",
        "CREATE INDEX jobs_by_state ON jobs (state, lease_expires_ms)",
        # offsets: JSON [[partition, offset], ...] in request order.
        f"""CREATE TABLE idempotency (
            key TEXT PRIMARY KEY,
            topic TEXT NOT NULL,
            offsets TEXT NOT NULL,
            created_ms {t.big} NOT NULL
        ){t.table_options}""",
        "CREATE INDEX idempotency_by_created ON idempotency (created_ms)",
        f"""CREATE TABLE group_offsets (
            group_id TEXT NOT NULL,
            topic TEXT NOT NULL,
            partition_id {t.small} NOT NULL,
            committed_offset {t.big} NOT NULL,
            committed_ms {t.big} NOT NULL,
            PRIMARY KEY (group_id, topic, partition_id)
        ){t.table_options}""",
        "CREATE INDEX group_offsets_by_topic ON group_offsets (topic)",
    )


def _v2(t: _Types) -> tuple[str, ...]:
    return (
        # Kafka's cleaner checkpoint: offsets below cleaned_offset have been deduplicated at least once.
        # Chunks with last_offset >= cleaned_offset are "dirty". It only grows (commit_compaction takes the
        # maximum), and existing partitions start fully dirty.
        f"ALTER TABLE partitions ADD COLUMN cleaned_offset {t.big} NOT NULL DEFAULT 0"
        " CHECK (cleaned_offset >= 0)",
        f"ALTER TABLE partitions ADD COLUMN last_compaction_ms {t.big}",
        # A row claims one file for one active (pending or leased) job; the primary key is what makes two
        # planners unable to put one file into two active jobs. Rows are deleted when the job finishes.
        f"""CREATE TABLE job_files (
            file_id {t.big} PRIMARY KEY REFERENCES files (file_id),
            job_id {t.big} NOT NULL REFERENCES jobs (job_id)
        ){t.table_options}""",
        "CREATE INDEX job_files_by_job ON job_files (job_id)",
        # The planner lists live files per level, oldest first. (Version 1 already has files_by_state for
        # GC's scan of obsolete files and jobs_by_state for leasing.)
        "CREATE INDEX files_by_level ON files (level, state, created_ms)",
    )


def _v3(t: _Types) -> tuple[str, ...]:
    return (
        # Idempotent producers' ids, handed out by InitProducerId. The id column never reuses a value (see
        # _Types.id_pk), so a forgotten producer's id cannot come back for another producer whose batches
        # would then look like its duplicates. epoch is the latest epoch handed out for the id and
        # last_epoch the one before it (-1 if none): a retried epoch bump is recognised by it (Kafka's
        # TransactionMetadata.lastProducerEpoch).
        f"""CREATE TABLE producer_ids (
            producer_id {t.id_pk},
            epoch {t.small} NOT NULL CHECK (epoch >= 0),
            last_epoch {t.small} NOT NULL,
            created_ms {t.big} NOT NULL,
            updated_ms {t.big} NOT NULL
        ){t.table_options}""",
        "CREATE INDEX producer_ids_by_updated ON producer_ids (updated_ms)",
        # What a partition remembers of a producer (Kafka's ProducerStateEntry): the epoch of its last
        # append and its last batches (at most 5), as JSON [[first_seq, last_seq, base_offset], ...],
        # oldest first. Written only by flush commits holding the partition's row lock. No foreign key:
        # a batch may carry a producer id this store did not hand out (Kafka accepts it too).
        f"""CREATE TABLE producer_state (
            topic TEXT NOT NULL,
            partition_id {t.small} NOT NULL,
            producer_id {t.big} NOT NULL,
            epoch {t.small} NOT NULL,
            batches TEXT NOT NULL,
            last_ms {t.big} NOT NULL,
            PRIMARY KEY (topic, partition_id, producer_id)
        ){t.table_options}""",
        "CREATE INDEX producer_state_by_last ON producer_state (last_ms)",
        "CREATE INDEX producer_state_by_producer ON producer_state (producer_id)",
    )


def _v4(t: _Types) -> tuple[str, ...]:
    return (
        # Consumer group coordinator state (agents/group_state.py): one row per group, read and written
        # whole by each group request, inside one transaction that holds the row. phase and protocol_type
        # are copies of the document's, for ListGroups without decoding every document.
        f"""CREATE TABLE consumer_groups (
            group_id TEXT PRIMARY KEY,
            phase TEXT NOT NULL,
            protocol_type TEXT,
            doc TEXT NOT NULL,
            updated_ms {t.big} NOT NULL
        ){t.table_options}""",
        # Kafka's OffsetCommit carries a metadata string and the leader epoch the consumer fetched at.
        "ALTER TABLE group_offsets ADD COLUMN metadata TEXT",
        f"ALTER TABLE group_offsets ADD COLUMN leader_epoch {t.big} NOT NULL DEFAULT -1",
    )


def _v5(t: _Types) -> tuple[str, ...]:
    return (
        # Agents that show themselves to Kafka clients as one cluster (broker/cluster.py): each registers
        # with its advertised address and heartbeats; a row older than the heartbeat timeout is a dead
        # agent, deleted by the next registration. node_id is unique among the rows, so two live agents
        # never share a broker id.
        f"""CREATE TABLE agents (
            agent_id TEXT PRIMARY KEY,
            node_id {t.small} NOT NULL UNIQUE,
            host TEXT NOT NULL,
            port {t.small} NOT NULL,
            heartbeat_ms {t.big} NOT NULL
        ){t.table_options}""",
    )


def _v6(t: _Types) -> tuple[str, ...]:
    return (
        # What a job touches and what its attempts reported (the HTTP API's job list). partitions: JSON
        # [[topic, partition], ...] of the chunks in the job's files when it was created (NULL for jobs
        # created before this version); stats: JSON, the last attempt's report (planner/stats.py).
        "ALTER TABLE jobs ADD COLUMN partitions TEXT",
        "ALTER TABLE jobs ADD COLUMN stats TEXT",
        # Listing jobs newest first within a state.
        "CREATE INDEX jobs_by_state_id ON jobs (state, job_id)",
        # One row per (job, topic it touches): the index of jobs by topic. state copies the job's (written
        # in the same transactions, under the job's row lock) so a listing by topic and state is one range
        # scan; the volumes are what a committed job read and wrote of the topic, for "bytes removed".
        f"""CREATE TABLE job_topics (
            job_id {t.big} NOT NULL REFERENCES jobs (job_id),
            topic TEXT NOT NULL,
            state TEXT NOT NULL,
            finished_ms {t.big},
            records_in {t.big} NOT NULL DEFAULT 0,
            records_out {t.big} NOT NULL DEFAULT 0,
            bytes_in {t.big} NOT NULL DEFAULT 0,
            bytes_out {t.big} NOT NULL DEFAULT 0,
            PRIMARY KEY (job_id, topic)
        ){t.table_options}""",
        "CREATE INDEX job_topics_by_topic ON job_topics (topic, job_id)",
        "CREATE INDEX job_topics_by_state ON job_topics (topic, state, job_id)",
        "CREATE INDEX job_topics_by_finish ON job_topics (topic, state, finished_ms, job_id)",
        # Active jobs of an upgraded database still hold their claims, so their topics are known; finished
        # ones released theirs and stay without topics.
        "INSERT INTO job_topics (job_id, topic, state)"
        " SELECT DISTINCT jf.job_id, c.topic, j.state FROM job_files jf"
        " JOIN chunks c ON c.file_id = jf.file_id JOIN jobs j ON j.job_id = jf.job_id",
        # The dirty ratio over time: one row per compacted topic at most every minute, written by the
        # compaction rounds (planner/samples.py) and kept for a day. The ratio is dirty / live bytes.
        f"""CREATE TABLE dirty_samples (
            topic TEXT NOT NULL,
            ts_ms {t.big} NOT NULL,
            dirty_bytes {t.big} NOT NULL,
            live_bytes {t.big} NOT NULL,
            PRIMARY KEY (topic, ts_ms)
        ){t.table_options}""",
        "CREATE INDEX dirty_samples_by_ts ON dirty_samples (ts_ms)",
    )


def _v7(t: _Types) -> tuple[str, ...]:
    return (
        # Ranges of a partition whose stored bytes fail their checks, as readers (compaction, a scan) found
        # them, and what an operator did about them: a quarantined range's chunk row is gone (its offsets
        # read as a hole) and this row is the audit record of it (who, when, why). One row per damaged
        # chunk: (topic, partition, first offset, object) names it.
        f"""CREATE TABLE damaged_ranges (
            topic TEXT NOT NULL,
            partition_id {t.small} NOT NULL,
            first_offset {t.big} NOT NULL,
            last_offset {t.big} NOT NULL,
            object_key TEXT NOT NULL,
            detail TEXT NOT NULL,
            found_by TEXT NOT NULL,
            found_ms {t.big} NOT NULL,
            quarantined_ms {t.big},
            quarantined_by TEXT,
            reason TEXT,
            PRIMARY KEY (topic, partition_id, first_offset, object_key)
        ){t.table_options}""",
    )


def _v8(t: _Types) -> tuple[str, ...]:
    return (
        # Kafka's ACLs, one row per binding (storage/acl_model.py); enums by their Kafka names. The
        # binding is the key: creating one that exists changes nothing, as Kafka's CreateAcls.
        f"""CREATE TABLE acls (
            resource_type TEXT NOT NULL,
            resource_name TEXT NOT NULL,
            pattern_type TEXT NOT NULL,
            principal TEXT NOT NULL,
            host TEXT NOT NULL,
            operation TEXT NOT NULL,
            permission TEXT NOT NULL,
            PRIMARY KEY (resource_type, resource_name, pattern_type, principal, host, operation, permission)
        ){t.table_options}""",
        # SCRAM credentials added at run time: the salt and the keys derived from the salted password
        # (RFC 5802), base64; never the password. One row per (user, mechanism), as Kafka keeps them.
        f"""CREATE TABLE scram_credentials (
            user_name TEXT NOT NULL,
            mechanism TEXT NOT NULL,
            salt TEXT NOT NULL,
            stored_key TEXT NOT NULL,
            server_key TEXT NOT NULL,
            iterations {t.small} NOT NULL,
            PRIMARY KEY (user_name, mechanism)
        ){t.table_options}""",
        # One row: bumped by every transaction that changes acls or scram_credentials, so an agent finds
        # out whether to reload them with one cheap read.
        f"""CREATE TABLE security_version (
            id {t.small} PRIMARY KEY CHECK (id = 1),
            version {t.big} NOT NULL
        ){t.table_options}""",
        "INSERT INTO security_version (id, version) VALUES (1, 0)",
    )


SQLITE_MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", _v1(_SQLITE)),
    Migration(2, "compaction: cleaner checkpoint, job file claims", _v2(_SQLITE)),
    Migration(3, "idempotent producers: producer ids, per-partition producer state", _v3(_SQLITE)),
    Migration(4, "consumer groups: coordinator state, commit metadata", _v4(_SQLITE)),
    Migration(5, "cluster: registered agents", _v5(_SQLITE)),
    Migration(6, "compaction reports: job stats and topics, dirty-ratio samples", _v6(_SQLITE)),
    Migration(7, "damaged ranges and their quarantine", _v7(_SQLITE)),
    Migration(8, "ACLs and SCRAM credentials, and their version", _v8(_SQLITE)),
    Migration(9, "transactions: coordinator state, open partitions, markers, aborted index", v9(_SQLITE)),
    Migration(10, "transactions: the delete horizon of markers in compacted partitions", v10(_SQLITE)),
)
POSTGRES_MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", _v1(_POSTGRES)),
    Migration(2, "compaction: cleaner checkpoint, job file claims", _v2(_POSTGRES)),
    Migration(3, "idempotent producers: producer ids, per-partition producer state", _v3(_POSTGRES)),
    Migration(4, "consumer groups: coordinator state, commit metadata", _v4(_POSTGRES)),
    Migration(5, "cluster: registered agents", _v5(_POSTGRES)),
    Migration(6, "compaction reports: job stats and topics, dirty-ratio samples", _v6(_POSTGRES)),
    Migration(7, "damaged ranges and their quarantine", _v7(_POSTGRES)),
    Migration(8, "ACLs and SCRAM credentials, and their version", _v8(_POSTGRES)),
    Migration(9, "transactions: coordinator state, open partitions, markers, aborted index", v9(_POSTGRES)),
    Migration(10, "transactions: the delete horizon of markers in compacted partitions", v10(_POSTGRES)),
)

MIGRATIONS: dict[str, tuple[Migration, ...]] = {
    "sqlite": SQLITE_MIGRATIONS,
    "postgres": POSTGRES_MIGRATIONS,
}

# Serialises schema changes of one PostgreSQL schema (search_path) across every process that starts.
# Keyed by the schema name so that independent schemas in one database (tests) do not wait on each other.
_POSTGRES_LOCK = (
    "SELECT pg_advisory_xact_lock(hashtext('strata.schema'), hashtext(coalesce(current_schema(), '')))"
)


def latest_version(dialect: str) -> int:
    return MIGRATIONS[dialect][-1].version


def migrate(tx: Tx, dialect: str, now_ms: int) -> list[int]:
    """Bring the schema up to date inside the caller's write transaction; returns the versions applied.

    Raises SettingsError when the database was migrated by a newer Strata than this one: running old code
    against a newer schema could write rows the newer code misreads.
    """
    return migrate_to(tx, dialect, now_ms, latest_version(dialect))


def migrate_to(tx: Tx, dialect: str, now_ms: int, target: int) -> list[int]:
    """``migrate``, stopping after version ``target``: builds the databases an older Strata left behind.

    Tests use it to check that each migration applies to a database at the previous version.
    """
    migrations = MIGRATIONS[dialect]
    versions = [m.version for m in migrations]
    if versions != sorted(set(versions)):
        raise SettingsError(f"{dialect} migrations are not strictly ordered: {versions}")
    if dialect == "postgres":
        tx.all(_POSTGRES_LOCK)
    tx.execute(
        "CREATE TABLE IF NOT EXISTS schema_version ("
        " version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_ms BIGINT NOT NULL)"
    )
    row = tx.one("SELECT MAX(version) FROM schema_version")
    current = int(row[0]) if row is not None and row[0] is not None else 0
    if current > versions[-1]:
        raise SettingsError(
            f"the metadata schema is at version {current}, newer than this Strata knows ({versions[-1]});"
            " upgrade Strata"
        )
    applied: list[int] = []
    for migration in migrations:
        if migration.version <= current or migration.version > target:
            continue
        for statement in migration.statements:
            tx.execute(statement)
        tx.execute(
            "INSERT INTO schema_version (version, description, applied_ms) VALUES (?, ?, ?)",
            (migration.version, migration.description, now_ms),
        )
        applied.append(migration.version)
    return applied
