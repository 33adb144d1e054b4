"""Topic names and topic configuration, with Kafka's names, defaults and validation rules.

Only explicitly set configs are stored; ``TopicConfig`` applies Kafka's defaults on read, so changing a
default in a later release changes every topic that did not override it, as in Kafka.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from storage.errors import InvalidConfig, InvalidTopicName
from storage.lake_config import LAKE_CONFIGS, derived_defaults
from storage.records import compression

_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_INTEGER_RE = re.compile(r"-?[0-9]{1,19}")  # a longer number is outside a long's range anyway
LONG_MAX = 2**63 - 1
MAX_PARTITIONS = 10_000

CLEANUP_DELETE = "delete"
CLEANUP_COMPACT = "compact"
_CLEANUP_POLICIES = {"delete", "compact", "compact,delete", "delete,compact"}

# Kafka's default and largest max.decompressed.message.bytes: the largest array a JVM allocates.
MAX_DECOMPRESSED_MESSAGE_BYTES = 2**31 - 9
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

# The flush classes (agents/flush_policy.py): how long a topic's records may wait for others to share
# their flush's PUT.
FLUSH_CLASS = "strata.flush.class"
STANDARD = "standard"
LOW_LATENCY = "low-latency"
FLUSH_CLASSES = (STANDARD, LOW_LATENCY)


def validate_topic_name(name: str) -> str:
    """Kafka's rule: [a-zA-Z0-9._-]{1,249}, and not "." or ".."."""
    if not isinstance(name, str) or not _TOPIC_RE.fullmatch(name) or name in (".", ".."):
        raise InvalidTopicName(
            f"invalid topic name {name!r}: use 1-249 characters from [a-zA-Z0-9._-], not '.' or '..'"
        )
    return name


def _long(min_value: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        # ASCII digits only: int() also takes "1_000", " 5 " and other scripts' digits, which would then be
        # stored as given. Values are Kafka longs (64-bit), as every reader of the config assumes.
        if not _INTEGER_RE.fullmatch(raw):
            raise InvalidConfig(f"expected a 64-bit integer, got {raw!r}")
        value = int(raw)
        if value < min_value:
            raise InvalidConfig(f"must be >= {min_value}, got {value}")
        if value > LONG_MAX:
            raise InvalidConfig(f"must be <= {LONG_MAX}, got {raw}")
        return value

    return parse


def _int(min_value: int, max_value: int, also: int | None = None) -> Callable[[str], int]:
    """Kafka's INT configs: a 32-bit integer in [min_value, max_value] (or exactly ``also``)."""

    def parse(raw: str) -> int:
        if not _INTEGER_RE.fullmatch(raw):
            raise InvalidConfig(f"expected a 32-bit integer, got {raw!r}")
        value = int(raw)
        if not min_value <= value <= max_value and value != also:
            extra = "" if also is None else f" or equal to {also}"
            raise InvalidConfig(f"must be between {min_value} and {max_value}{extra}, got {value}")
        return value

    return parse


def _level(codec: int) -> Callable[[str], int]:
    # The ranges Kafka 4.4 declares for compression.<codec>.level (KIP-390), kept in the codec module.
    lowest, highest = compression.LEVEL_RANGES[codec]
    return _int(lowest, highest, -1 if codec == compression.GZIP else None)


def _ratio(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise InvalidConfig(f"expected a number between 0 and 1, got {raw!r}") from None
    if not 0.0 <= value <= 1.0:
        raise InvalidConfig(f"must be between 0 and 1, got {value}")
    return value


# compression.type: the codec a topic stores its batches with. "producer" keeps each batch's own codec.
COMPRESSION_PRODUCER = "producer"
COMPRESSION_TYPES: dict[str, int] = {
    "uncompressed": compression.NONE,
    "gzip": compression.GZIP,
    "snappy": compression.SNAPPY,
    "lz4": compression.LZ4,
    "zstd": compression.ZSTD,
}


def _compression_type(raw: str) -> str:
    # Exact lower-case names, as Kafka's validator (ValidString) takes them.
    if raw != COMPRESSION_PRODUCER and raw not in COMPRESSION_TYPES:
        raise InvalidConfig(
            f"compression.type must be one of producer, {', '.join(COMPRESSION_TYPES)}; got {raw!r}"
        )
    return raw


def _bool(raw: str) -> str:
    if raw.lower() not in ("true", "false"):
        raise InvalidConfig(f"expected true or false, got {raw!r}")
    return raw.lower()


TIMESTAMP_CREATE_TIME = "CreateTime"
TIMESTAMP_LOG_APPEND_TIME = "LogAppendTime"


def _timestamp_type(raw: str) -> str:
    # Kafka's values, case as written (its validator is ValidString.in("CreateTime", "LogAppendTime")).
    # Kafka Streams sets CreateTime on every internal topic it creates.
    if raw not in (TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME):
        raise InvalidConfig(f"message.timestamp.type must be CreateTime or LogAppendTime; got {raw!r}")
    return raw


def _any(raw: str) -> str:
    return raw


# --- schema validation on produce (registry/validate.py) -------------------------------------------------
# Confluent Server's topic configs, with Redpanda's names as aliases. Each alias pair is one setting: the
# confluent.* name wins when only it is set, the redpanda.* one otherwise, and setting both to different
# values is refused, as Redpanda refuses it (its schema_id_validation_validator).
SUBJECT_STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."
DEFAULT_STRATEGY = "TopicNameStrategy"
VALIDATION_LEVELS = ("id", "payload")
KEY, VALUE = "key", "value"


def subject_strategy(raw: str) -> str:
    """The strategy's short name, from it or from Confluent's full class name (Redpanda accepts both)."""
    short = raw[len(STRATEGY_PACKAGE) :] if raw.startswith(STRATEGY_PACKAGE) else raw
    if short not in SUBJECT_STRATEGIES:
        raise InvalidConfig(
            f"expected one of {', '.join(SUBJECT_STRATEGIES)} (or {STRATEGY_PACKAGE}<name>), got {raw!r}"
        )
    return short


def _validation_level(raw: str) -> str:
    if raw not in VALIDATION_LEVELS:
        raise InvalidConfig(f"expected id or payload, got {raw!r}")
    return raw


def _schema_configs(field: str) -> dict[str, tuple[Callable[[str], object], str]]:
    return {
        f"confluent.{field}.schema.validation": (_bool, "false"),
        f"confluent.{field}.subject.name.strategy": (subject_strategy, STRATEGY_PACKAGE + DEFAULT_STRATEGY),
        f"redpanda.{field}.schema.id.validation": (_bool, "false"),
        f"redpanda.{field}.subject.name.strategy": (subject_strategy, DEFAULT_STRATEGY),
        # Strata's own: "payload" also decodes every payload with its schema (opt-in: it costs Python per
        # record, docs/benchmarks.md).
        f"strata.{field}.schema.validation.level": (_validation_level, VALIDATION_LEVELS[0]),
    }


# (confluent.* name, redpanda.* alias, parser): the alias pairs.
SCHEMA_ALIASES: tuple[tuple[str, str, Callable[[str], str]], ...] = tuple(
    pair
    for field in (KEY, VALUE)
    for pair in (
        (f"confluent.{field}.schema.validation", f"redpanda.{field}.schema.id.validation", _bool),
        (
            f"confluent.{field}.subject.name.strategy",
            f"redpanda.{field}.subject.name.strategy",
            subject_strategy,
        ),
    )
)


def check_aliases(configs: Mapping[str, str]) -> None:
    """InvalidConfig if a confluent.* schema config and its redpanda.* alias are both set, differently."""
    for name, alias, parse in SCHEMA_ALIASES:
        if name in configs and alias in configs and parse(configs[name]) != parse(configs[alias]):
            raise InvalidConfig(
                f"{name}={configs[name]!r} and its alias {alias}={configs[alias]!r} disagree; set one, or"
                " both to the same value"
            )


def _aliased(overrides: Mapping[str, str], name: str, alias: str, default: str) -> str:
    return overrides.get(name, overrides.get(alias, default))


_THROTTLED_RE = re.compile(r"\*|[0-9]+:[0-9]+(,[0-9]+:[0-9]+)*")


def _throttled_replicas(raw: str) -> str:
    # Kafka's ThrottledReplicaListValidator: empty, "*", or partition:broker pairs.
    if raw.replace(" ", "") and not _THROTTLED_RE.fullmatch(raw.replace(" ", "")):
        raise InvalidConfig(f"expected '*' or a list of partition:broker pairs, got {raw!r}")
    return raw


def _flush_class(raw: str) -> str:
    if raw not in FLUSH_CLASSES:
        raise InvalidConfig(f"must be one of {', '.join(FLUSH_CLASSES)}, got {raw!r}")
    return raw


def _policy(raw: str) -> str:
    if raw.replace(" ", "") not in _CLEANUP_POLICIES:
        raise InvalidConfig(f"cleanup.policy must be delete, compact or compact,delete; got {raw!r}")
    return raw


# name -> (parser, Kafka default). -1 means "unlimited" where Kafka uses it that way.
_SPEC: dict[str, tuple[Callable[[str], object], str]] = {
    "cleanup.policy": (_policy, "delete"),
    "retention.ms": (_long(-1), str(7 * DAY_MS)),
    "retention.bytes": (_long(-1), "-1"),
    "delete.retention.ms": (_long(0), str(DAY_MS)),
    "min.compaction.lag.ms": (_long(0), "0"),
    "max.compaction.lag.ms": (_long(1), str(2**63 - 1)),
    "min.cleanable.dirty.ratio": (_ratio, "0.5"),
    "max.message.bytes": (_long(0), str(1024 * 1024 + 12)),
    # CreateTime bounds relative to the agent's clock. Kafka 4.0's defaults (KIP-1030): any age, at most one
    # hour in the future.
    "message.timestamp.before.max.ms": (_long(0), str(LONG_MAX)),
    "message.timestamp.after.max.ms": (_long(0), str(HOUR_MS)),
    # LogAppendTime: each batch is stamped with the agent's time when produce accepts it (its maxTimestamp,
    # attributes bit 3), and the CreateTime window above does not apply, as in Kafka. A change applies to
    # batches produced afterwards; stored batches keep the type they were written with.
    "message.timestamp.type": (_timestamp_type, TIMESTAMP_CREATE_TIME),
    "compression.type": (_compression_type, COMPRESSION_PRODUCER),
    # The level Strata compresses with when it writes a batch in the codec on the topic's behalf: a
    # producer's batch re-compressed to compression.type, an HTTP produce request's batches, and a batch
    # compaction rewrites. Kafka's mapping onto the libraries: storage/records/compression.py.
    "compression.gzip.level": (_level(compression.GZIP), str(compression.DEFAULT_LEVELS[compression.GZIP])),
    "compression.lz4.level": (_level(compression.LZ4), str(compression.DEFAULT_LEVELS[compression.LZ4])),
    "compression.zstd.level": (_level(compression.ZSTD), str(compression.DEFAULT_LEVELS[compression.ZSTD])),
    # The largest record (its body, after its length varint) a producer's compressed batch may hold once
    # decompressed: a larger one refuses the batch with INVALID_RECORD, as Kafka 4.4's LogValidator does.
    # Kafka's range: 1 to its largest array, 2^31 - 9, the default (no cap beyond that).
    "max.decompressed.message.bytes": (
        _int(1, MAX_DECOMPRESSED_MESSAGE_BYTES),
        str(MAX_DECOMPRESSED_MESSAGE_BYTES),
    ),
    **_schema_configs(KEY),
    **_schema_configs(VALUE),
    # Unset, a topic takes its agent's default class (STRATA_FLUSH_CLASS), which DescribeConfigs shows
    # as the default (``effective_configs``' ``defaults``); this default is for a caller without an agent.
    FLUSH_CLASS: (_flush_class, STANDARD),
}
# Kafka topic configs that mean nothing here (no segments, no local flush, no replicas), accepted and
# stored with Kafka's validation so that existing tooling that sets them works, and reported by
# DescribeConfigs, as WarpStream does. librdkafka's suite sets some of them (0092, 0129). Not in this list:
# configs whose effect a user would rely on (tiered storage).
NO_EFFECT_CONFIGS: dict[str, tuple[Callable[[str], object], str]] = {
    "segment.bytes": (_long(14), str(1024**3)),
    "segment.ms": (_long(1), str(7 * DAY_MS)),
    "segment.jitter.ms": (_long(0), "0"),
    "segment.index.bytes": (_long(4), str(10 * 1024 * 1024)),
    "index.interval.bytes": (_long(0), "4096"),
    "flush.messages": (_long(1), str(LONG_MAX)),
    "flush.ms": (_long(0), str(LONG_MAX)),
    "file.delete.delay.ms": (_long(0), "60000"),
    "preallocate": (_bool, "false"),
    "min.insync.replicas": (_long(1), "1"),
    "unclean.leader.election.enable": (_bool, "false"),
    # Replication throttles, which kafka-reassign-partitions sets: Strata moves no replicas.
    "leader.replication.throttled.replicas": (_throttled_replicas, ""),
    "follower.replication.throttled.replicas": (_throttled_replicas, ""),
    "message.format.version": (_any, "3.0-IV1"),
    "message.downconversion.enable": (_bool, "true"),
}
_SPEC.update(NO_EFFECT_CONFIGS)
# The topic as an Iceberg table (storage/lake_config.py, pipeline/lake).
_SPEC.update(LAKE_CONFIGS)
KNOWN_CONFIGS = frozenset(_SPEC)


def check_config_name(name: str) -> str:
    if name not in _SPEC:
        raise InvalidConfig(f"unknown topic config {name!r}; known: {', '.join(sorted(_SPEC))}")
    return name


def validate_configs(configs: Mapping[str, object]) -> dict[str, str]:
    """Check names and values; returns the configs as strings, as they are stored. Raises InvalidConfig."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        check_config_name(name)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise InvalidConfig(f"{name}: value must be a string or a number")
        raw = str(value)
        parser = _SPEC[name][0]
        try:
            parser(raw)
        except InvalidConfig as exc:
            raise InvalidConfig(f"{name}: {exc.message}") from None
        out[name] = raw
    check_aliases(out)
    return out


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """The effective configuration of a topic: stored overrides on top of Kafka's defaults."""

    cleanup_policy: frozenset[str]
    retention_ms: int
    retention_bytes: int
    delete_retention_ms: int
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    min_cleanable_dirty_ratio: float
    max_message_bytes: int
    message_timestamp_before_max_ms: int
    message_timestamp_after_max_ms: int
    message_timestamp_type: str
    compression_type: str
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    max_decompressed_message_bytes: int
    # Schema validation on produce, per field: whether it is on, the subject name strategy (short name)
    # and the level ("id" or "payload").
    key_schema_validation: bool = False
    value_schema_validation: bool = False
    key_subject_strategy: str = DEFAULT_STRATEGY
    value_subject_strategy: str = DEFAULT_STRATEGY
    key_validation_level: str = VALIDATION_LEVELS[0]
    value_validation_level: str = VALIDATION_LEVELS[0]
    # The topic's own flush class; None: its agent's default.
    flush_class: str | None = None

    @property
    def schema_validation(self) -> bool:
        """Whether produce checks the records' schema ids (of the key, the value or both)."""
        return self.key_schema_validation or self.value_schema_validation

    @property
    def compression_codec(self) -> int | None:
        """The codec batches are stored with (``storage.records.compression`` ids), None to keep the
        producer's."""
        return COMPRESSION_TYPES.get(self.compression_type)

    def compression_level(self, codec: int) -> int | None:
        """The topic's level for ``codec`` in Kafka's terms, for ``compression.compress``; None for a
        codec without levels (none, snappy)."""
        if codec == compression.GZIP:
            return self.compression_gzip_level
        if codec == compression.LZ4:
            return self.compression_lz4_level
        if codec == compression.ZSTD:
            return self.compression_zstd_level
        return None

    @property
    def log_append_time(self) -> bool:
        """Whether produce stamps batches with the agent's time (LogAppendTime) instead of checking the
        producer's timestamps against the CreateTime window."""
        return self.message_timestamp_type == TIMESTAMP_LOG_APPEND_TIME

    @property
    def compacted(self) -> bool:
        return CLEANUP_COMPACT in self.cleanup_policy

    @property
    def deletes(self) -> bool:
        return CLEANUP_DELETE in self.cleanup_policy

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, str]) -> TopicConfig:
        merged = {name: default for name, (_, default) in _SPEC.items()}
        merged.update(overrides)

        def long(name: str) -> int:
            return int(merged[name])

        key, value = _schema_field(overrides, KEY), _schema_field(overrides, VALUE)

        return cls(
            cleanup_policy=frozenset(merged["cleanup.policy"].replace(" ", "").split(",")),
            retention_ms=long("retention.ms"),
            retention_bytes=long("retention.bytes"),
            delete_retention_ms=long("delete.retention.ms"),
            min_compaction_lag_ms=long("min.compaction.lag.ms"),
            max_compaction_lag_ms=long("max.compaction.lag.ms"),
            min_cleanable_dirty_ratio=float(merged["min.cleanable.dirty.ratio"]),
            max_message_bytes=long("max.message.bytes"),
            message_timestamp_before_max_ms=long("message.timestamp.before.max.ms"),
            message_timestamp_after_max_ms=long("message.timestamp.after.max.ms"),
            message_timestamp_type=merged["message.timestamp.type"],
            compression_type=merged["compression.type"],
            compression_gzip_level=long("compression.gzip.level"),
            compression_lz4_level=long("compression.lz4.level"),
            compression_zstd_level=long("compression.zstd.level"),
            max_decompressed_message_bytes=long("max.decompressed.message.bytes"),
            key_schema_validation=key[0],
            value_schema_validation=value[0],
            key_subject_strategy=key[1],
            value_subject_strategy=value[1],
            key_validation_level=key[2],
            value_validation_level=value[2],
            flush_class=overrides.get(FLUSH_CLASS),
        )


def _schema_field(overrides: Mapping[str, str], field: str) -> tuple[bool, str, str]:
    """(on, strategy, level) of a field's schema validation, each alias pair read as one setting."""
    on = _aliased(
        overrides, f"confluent.{field}.schema.validation", f"redpanda.{field}.schema.id.validation", ""
    )
    strategy = _aliased(
        overrides,
        f"confluent.{field}.subject.name.strategy",
        f"redpanda.{field}.subject.name.strategy",
        DEFAULT_STRATEGY,
    )
    level = overrides.get(f"strata.{field}.schema.validation.level", VALIDATION_LEVELS[0])
    return on.lower() == "true", subject_strategy(strategy), level


def effective_configs(
    overrides: Mapping[str, str], topic: str | None = None, defaults: Mapping[str, str] | None = None
) -> dict[str, str]:
    """All configs with defaults filled in, for display (GET /v1/topics/{t}, DescribeConfigs). With the
    ``topic``'s name, defaults that derive from it (the lake's table name) are given for that topic; the
    lake's upsert default follows the overrides' cleanup.policy. ``defaults``: the agent's own defaults
    for configs that have one (the flush class), in place of the built-in ones."""
    merged = {name: default for name, (_, default) in _SPEC.items()}
    merged.update(defaults or {})
    merged.update(derived_defaults(topic, overrides))
    merged.update(overrides)
    return merged
