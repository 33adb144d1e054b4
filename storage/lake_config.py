"""The ``strata.iceberg.*`` topic configs: a topic kept as an Apache Iceberg table (``pipeline/lake``).

Names and values follow Redpanda's Iceberg topics where they overlap (``strata.iceberg.mode``, the partition
spec syntax), so users can move. ``storage/topic_config.py`` lists them with the other topic configs, so they
are validated, stored, shown by DescribeConfigs and changed by the usual admin APIs; ``LakeTopicConfig``
reads a topic's effective lake settings.

- ``strata.iceberg.mode``: ``disabled`` (the default); ``raw`` (the table holds exactly the columns of
  Spark's Kafka source: key, value, topic, partition, offset, timestamp, timestampType, headers); or one of
  Redpanda's typed modes, where the value schema's fields are the columns: ``value_schema_id_prefix`` (each
  value carries Confluent's framing, magic byte 0 and a 4-byte schema id) or ``value_schema_latest`` (bare
  payloads of the latest schema of the topic's ``<topic>-value`` subject), spelled with Redpanda's options
  as ``value_schema_latest:subject=<subject>,protobuf_name=<full message name>`` (either, both or none).
- ``strata.iceberg.invalid.record.action``: what a typed table does with a record it cannot convert:
  ``dlq_table`` (the default: the dead-letter table, the raw columns and the reason) or ``drop`` (only
  counted).
- ``strata.iceberg.table``: ``namespace.table``; by default ``strata.<topic>`` with ``.`` and ``-`` mapped
  to ``_``, so a topic name is always a valid table name.
- ``strata.iceberg.commit.interval.ms``: how often the lake writer commits the new records (at least 10 s).
- ``strata.iceberg.partition.spec``: ``(day(timestamp))`` by default; ``()`` for none; a comma-separated
  list of ``year|month|day|hour(timestamp)``, ``bucket(N, key|partition)`` and ``partition`` (identity).
- ``strata.iceberg.backfill``: ``from_log_start`` (the default: the table gets what the topic already has)
  or ``from_now`` (the first commit starts at the last stable offset).
- ``strata.iceberg.delete.with.topic``: whether deleting the topic drops its table (default true).
- ``strata.iceberg.max.retention.hold.ms``: how long time and size retention wait for the table to commit
  records they would delete (default one day; 0: they do not wait). ``planner/lake_hold.py`` applies it.
- ``strata.iceberg.snapshot.retention.ms``: how long a snapshot stays after a newer one replaced it as the
  table's current one (default seven days); table maintenance (``pipeline/lake/maintenance.py``) expires
  older ones.
- ``strata.iceberg.upsert``: whether the writer also keeps the topic's state table (``<table>_state``, one
  row per live key: ``pipeline/lake/state_writer.py``). Its default derives from the topic's
  ``cleanup.policy``: true when it includes ``compact``, false otherwise, so DescribeConfigs shows the
  default the topic actually gets.
- ``strata.iceberg.upsert.buckets``: the state table's key buckets (1-1024, default 16), the unit a commit
  rewrites. Fixed when the state table is created (a key's bucket must not move under it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from storage.errors import InvalidConfig

MODE = "strata.iceberg.mode"
TABLE = "strata.iceberg.table"
COMMIT_INTERVAL = "strata.iceberg.commit.interval.ms"
PARTITION_SPEC = "strata.iceberg.partition.spec"
BACKFILL = "strata.iceberg.backfill"
DELETE_WITH_TOPIC = "strata.iceberg.delete.with.topic"
MAX_RETENTION_HOLD = "strata.iceberg.max.retention.hold.ms"
SNAPSHOT_RETENTION = "strata.iceberg.snapshot.retention.ms"

INVALID_RECORD_ACTION = "strata.iceberg.invalid.record.action"
UPSERT = "strata.iceberg.upsert"
UPSERT_BUCKETS = "strata.iceberg.upsert.buckets"

MODE_DISABLED = "disabled"
MODE_RAW = "raw"
MODE_ID_PREFIX = "value_schema_id_prefix"
MODE_LATEST = "value_schema_latest"
MODES = (MODE_DISABLED, MODE_RAW, MODE_ID_PREFIX, MODE_LATEST)
# value_schema_latest's options, as Redpanda spells them: value_schema_latest:subject=s,protobuf_name=m.
LATEST_OPTIONS = ("subject", "protobuf_name")

ACTION_DLQ = "dlq_table"
ACTION_DROP = "drop"
ACTIONS = (ACTION_DLQ, ACTION_DROP)

BACKFILL_FROM_LOG_START = "from_log_start"
BACKFILL_FROM_NOW = "from_now"
BACKFILLS = (BACKFILL_FROM_LOG_START, BACKFILL_FROM_NOW)

MIN_COMMIT_INTERVAL_MS = 10_000
DEFAULT_COMMIT_INTERVAL_MS = 60_000
DEFAULT_PARTITION_SPEC = "(day(timestamp))"
DAY_MS = 24 * 3_600_000
DEFAULT_MAX_RETENTION_HOLD_MS = DAY_MS
DEFAULT_SNAPSHOT_RETENTION_MS = 7 * DAY_MS
# Shown as the table's default where the topic is unknown; ``default_table`` gives the real one.
TABLE_DEFAULT_PLACEHOLDER = "strata.<topic>"
DEFAULT_NAMESPACE = "strata"
DEFAULT_UPSERT_BUCKETS = 16
MAX_UPSERT_BUCKETS = 1024
# Read here rather than from storage/topic_config.py, which imports this module.
_CLEANUP_POLICY, _COMPACT, _DEFAULT_CLEANUP_POLICY = "cleanup.policy", "compact", "delete"

# The time transforms take the record timestamp; bucket takes the key or the partition number.
TIME_TRANSFORMS = ("year", "month", "day", "hour")
BUCKET_COLUMNS = ("key", "partition")
_MAX_BUCKETS = 1 << 20
_NAME_PART = re.compile(r"[A-Za-z0-9_]{1,255}")
# 255 less the longest companion suffix ("_state"; "_dlq" is shorter). A Kafka topic name has at most 249
# characters, so every default table name fits.
_MAX_TABLE_PART = 255 - len("_state")
_TERM = re.compile(r"\s*(?:(?P<fn>[a-z]+)\s*\((?P<args>[^()]*)\)|(?P<col>[A-Za-z_]+))\s*")


@dataclass(frozen=True, slots=True)
class PartitionTerm:
    """One field of a table's partition spec: ``transform`` of ``column`` (``buckets`` for bucket)."""

    transform: str  # year, month, day, hour, bucket or identity
    column: str
    buckets: int = 0


def default_table(topic: str) -> str:
    """``strata.<topic>`` with ``.`` and ``-`` mapped to ``_``."""
    return f"{DEFAULT_NAMESPACE}.{topic.replace('.', '_').replace('-', '_')}"


# The dead-letter table of a typed table: ``<table>_dlq`` beside it (Redpanda names it ``<topic>~dlq``, which
# SQL readers must quote; a name of the table's own characters reads unquoted everywhere, and a table that
# holds another topic's records is refused by its ``strata.topic`` property, so a topic named ``x_dlq`` can
# never write into topic ``x``'s dead letters).
DEAD_LETTER_SUFFIX = "_dlq"


def dead_letter_table(table: str) -> str:
    return f"{table}{DEAD_LETTER_SUFFIX}"


@dataclass(frozen=True, slots=True)
class LakeMode:
    """``strata.iceberg.mode`` read: the mode's name, and ``value_schema_latest``'s options (None: the
    default, the topic's ``<topic>-value`` subject and the schema's first Protobuf message)."""

    name: str
    subject: str | None = None
    protobuf_name: str | None = None

    @property
    def typed(self) -> bool:
        return self.name in (MODE_ID_PREFIX, MODE_LATEST)

    def value_subject(self, topic: str) -> str:
        return self.subject or f"{topic}-value"


def read_mode(raw: str) -> LakeMode:
    """The mode of ``raw``; raises InvalidConfig with the reason."""
    name, colon, options = raw.partition(":")
    if name not in MODES:
        raise InvalidConfig(f"expected one of {', '.join(MODES)}, got {raw!r}")
    if not colon:
        return LakeMode(name)
    if name != MODE_LATEST:
        raise InvalidConfig(f"{name} takes no options, got {raw!r}")
    found: dict[str, str] = {}
    for option in options.split(","):
        key, eq, value = (part.strip() for part in option.partition("="))
        if key not in LATEST_OPTIONS or not eq or not value:
            raise InvalidConfig(
                f"{raw!r}: expected {MODE_LATEST}:subject=<subject>,protobuf_name=<message>, each"
                f" option at most once, got {option.strip()!r}"
            )
        if key in found:
            raise InvalidConfig(f"{raw!r} repeats the option {key!r}")
        found[key] = value
    return LakeMode(name, found.get("subject"), found.get("protobuf_name"))


def default_upsert(overrides: Mapping[str, str]) -> str:
    """``true`` for a topic whose cleanup.policy includes compact, else ``false``."""
    policy = overrides.get(_CLEANUP_POLICY, _DEFAULT_CLEANUP_POLICY).replace(" ", "").split(",")
    return "true" if _COMPACT in policy else "false"


def derived_defaults(topic: str | None, overrides: Mapping[str, str]) -> dict[str, str]:
    """The lake defaults that depend on the topic: its table name (when the name is known) and upsert."""
    out = {UPSERT: default_upsert(overrides)}
    if topic is not None:
        out[TABLE] = default_table(topic)
    return out


def parse_mode(raw: str) -> str:
    read_mode(raw)
    return raw


def parse_action(raw: str) -> str:
    if raw not in ACTIONS:
        raise InvalidConfig(f"expected one of {', '.join(ACTIONS)}, got {raw!r}")
    return raw


def parse_table(raw: str) -> str:
    """``namespace.table`` (namespaces may nest: ``a.b.table``), each part of [A-Za-z0-9_]."""
    parts = raw.split(".")
    if len(parts) < 2 or not all(_NAME_PART.fullmatch(p) for p in parts):
        raise InvalidConfig(
            f"expected namespace.table, each part 1-255 characters of [A-Za-z0-9_], got {raw!r}"
        )
    # The table's companions (``<table>_dlq``, ``<table>_state``) must fit the same 255 characters.
    if len(parts[-1]) > _MAX_TABLE_PART:
        raise InvalidConfig(
            f"the table name {parts[-1][:20]}... is {len(parts[-1])} characters: at most {_MAX_TABLE_PART},"
            " so that its dead-letter and state tables' names fit in 255"
        )
    return raw


def parse_backfill(raw: str) -> str:
    if raw not in BACKFILLS:
        raise InvalidConfig(f"expected one of {', '.join(BACKFILLS)}, got {raw!r}")
    return raw


def parse_partition_spec(raw: str) -> tuple[PartitionTerm, ...]:
    """Redpanda's syntax: ``(day(timestamp))``, ``(hour(timestamp), bucket(16, key))``, ``()``."""
    text = raw.strip()
    if not (text.startswith("(") and text.endswith(")")):
        raise InvalidConfig(
            f"expected a parenthesised list such as {DEFAULT_PARTITION_SPEC} or (), got {raw!r}"
        )
    body = text[1:-1].strip()
    if not body:
        return ()
    terms: list[PartitionTerm] = []
    position = 0
    while position < len(body):
        match = _TERM.match(body, position)
        if match is None:
            raise InvalidConfig(f"cannot read the partition spec {raw!r} at {body[position:]!r}")
        terms.append(_term(match, raw))
        position = match.end()
        if position < len(body):
            if body[position] != ",":
                raise InvalidConfig(f"expected ',' in the partition spec {raw!r} at {body[position:]!r}")
            position += 1
    if len({(t.transform, t.column) for t in terms}) != len(terms):
        raise InvalidConfig(f"the partition spec {raw!r} repeats a field")
    return tuple(terms)


def _term(match: re.Match[str], raw: str) -> PartitionTerm:
    column = match.group("col")
    if column is not None:
        if column != "partition":
            raise InvalidConfig(f"{raw!r}: only partition can be used without a transform, not {column!r}")
        return PartitionTerm("identity", column)
    fn, args = match.group("fn"), [a.strip() for a in match.group("args").split(",")]
    if fn in TIME_TRANSFORMS:
        if args != ["timestamp"]:
            raise InvalidConfig(f"{raw!r}: {fn}() takes the timestamp column, as {fn}(timestamp)")
        return PartitionTerm(fn, "timestamp")
    if fn == "identity":
        if args != ["partition"]:
            raise InvalidConfig(f"{raw!r}: identity() takes the partition column")
        return PartitionTerm("identity", "partition")
    if fn == "bucket":
        if len(args) != 2 or not args[0].isdigit() or args[1] not in BUCKET_COLUMNS:
            raise InvalidConfig(f"{raw!r}: expected bucket(N, key) or bucket(N, partition)")
        buckets = int(args[0])
        if not 1 <= buckets <= _MAX_BUCKETS:
            raise InvalidConfig(f"{raw!r}: the bucket count must be between 1 and {_MAX_BUCKETS}")
        return PartitionTerm("bucket", args[1], buckets)
    raise InvalidConfig(
        f"{raw!r}: unknown transform {fn!r}; use {', '.join(TIME_TRANSFORMS)}, bucket or identity"
    )


def _spec_check(raw: str) -> str:
    parse_partition_spec(raw)
    return raw


def _non_negative(raw: str) -> int:
    if not re.fullmatch(r"[0-9]{1,19}", raw) or int(raw) > 2**63 - 1:
        raise InvalidConfig(f"expected a non-negative 64-bit integer, got {raw!r}")
    return int(raw)


def _interval(raw: str) -> int:
    if not re.fullmatch(r"[0-9]{1,19}", raw) or int(raw) > 2**63 - 1:
        raise InvalidConfig(f"expected a 64-bit integer, got {raw!r}")
    value = int(raw)
    if value < MIN_COMMIT_INTERVAL_MS:
        raise InvalidConfig(f"must be >= {MIN_COMMIT_INTERVAL_MS}, got {value}")
    return value


def _buckets(raw: str) -> int:
    if not re.fullmatch(r"[0-9]{1,5}", raw) or not 1 <= int(raw) <= MAX_UPSERT_BUCKETS:
        raise InvalidConfig(f"expected an integer between 1 and {MAX_UPSERT_BUCKETS}, got {raw!r}")
    return int(raw)


def _bool(raw: str) -> str:
    if raw.lower() not in ("true", "false"):
        raise InvalidConfig(f"expected true or false, got {raw!r}")
    return raw.lower()


# name -> (parser, default), merged into the topic configs' table (storage/topic_config._SPEC).
LAKE_CONFIGS = {
    MODE: (parse_mode, MODE_DISABLED),
    TABLE: (parse_table, TABLE_DEFAULT_PLACEHOLDER),
    COMMIT_INTERVAL: (_interval, str(DEFAULT_COMMIT_INTERVAL_MS)),
    PARTITION_SPEC: (_spec_check, DEFAULT_PARTITION_SPEC),
    BACKFILL: (parse_backfill, BACKFILL_FROM_LOG_START),
    DELETE_WITH_TOPIC: (_bool, "true"),
    INVALID_RECORD_ACTION: (parse_action, ACTION_DLQ),
    MAX_RETENTION_HOLD: (_non_negative, str(DEFAULT_MAX_RETENTION_HOLD_MS)),
    SNAPSHOT_RETENTION: (_non_negative, str(DEFAULT_SNAPSHOT_RETENTION_MS)),
    # Shown per topic by ``derived_defaults``: true for compacted topics.
    UPSERT: (_bool, "false"),
    UPSERT_BUCKETS: (_buckets, str(DEFAULT_UPSERT_BUCKETS)),
}


@dataclass(frozen=True, slots=True)
class LakeTopicConfig:
    """A topic's effective lake settings, from its stored overrides."""

    mode: str
    table: str
    commit_interval_ms: int
    partition_spec: tuple[PartitionTerm, ...]
    backfill: str
    delete_with_topic: bool
    invalid_record_action: str = ACTION_DLQ
    max_retention_hold_ms: int = DEFAULT_MAX_RETENTION_HOLD_MS
    snapshot_retention_ms: int = DEFAULT_SNAPSHOT_RETENTION_MS
    upsert: bool = False
    upsert_buckets: int = DEFAULT_UPSERT_BUCKETS

    @property
    def enabled(self) -> bool:
        return self.mode != MODE_DISABLED

    @property
    def lake_mode(self) -> LakeMode:
        return read_mode(self.mode)

    @classmethod
    def from_overrides(cls, topic: str, overrides: Mapping[str, str]) -> LakeTopicConfig:
        def get(name: str) -> str:
            return overrides.get(name, LAKE_CONFIGS[name][1])

        return cls(
            mode=get(MODE),
            table=overrides.get(TABLE) or default_table(topic),
            commit_interval_ms=int(get(COMMIT_INTERVAL)),
            partition_spec=parse_partition_spec(get(PARTITION_SPEC)),
            backfill=get(BACKFILL),
            delete_with_topic=get(DELETE_WITH_TOPIC).lower() == "true",
            invalid_record_action=get(INVALID_RECORD_ACTION),
            max_retention_hold_ms=int(get(MAX_RETENTION_HOLD)),
            snapshot_retention_ms=int(get(SNAPSHOT_RETENTION)),
            upsert=overrides.get(UPSERT, default_upsert(overrides)).lower() == "true",
            upsert_buckets=int(get(UPSERT_BUCKETS)),
        )
