"""Where Strata answers differently from Kafka's broker on purpose, with the reason.

Each entry names the answer paths it covers (``scenario/step/field`` patterns in ``fnmatch`` syntax; list
entries with an identity appear as ``name`` or ``partition_index=N``). docs/kafka-clients.md ("Where Strata
differs from Kafka's broker") lists the same divergences for users, and
tests/differential/test_differential.py keeps the two in step: every key here is named there.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Divergence:
    key: str
    reason: str
    paths: tuple[str, ...]


INTENDED: tuple[Divergence, ...] = (
    Divergence(
        "replication-factor",
        "Strata accepts any replication factor and reports 1: durability comes from object storage, not "
        "replicas, and scripts written for three-broker clusters create topics with 3. A single Kafka "
        "broker refuses more replicas than brokers (INVALID_REPLICATION_FACTOR).",
        ("create-and-delete-topics/replication factor 3/*",),
    ),
    Divergence(
        "tiered-storage-configs",
        "Kafka's tiered-storage configs (remote.storage.enable, local.retention.*, remote.log.*, "
        "remote.copy.lag.*) are not Strata's: its whole log is in object storage, with no local tier.",
        (
            "*/configs/remote.storage.enable",
            "*/configs/remote.log.*",
            "*/configs/remote.copy.lag.*",
            "*/configs/local.retention.*",
        ),
    ),
    Divergence(
        "share-group-configs",
        "errors.deadletterqueue.group.enable belongs to share groups (KIP-932), which Strata does not have.",
        ("*/configs/errors.deadletterqueue.group.enable",),
    ),
    Divergence(
        "kafka-3-configs",
        "Strata still accepts and lists message.format.version and message.downconversion.enable, which "
        "Kafka 4 removed: tools and tests written for Kafka 3 set them (librdkafka's suite does).",
        ("*/configs/message.format.version", "*/configs/message.downconversion.enable"),
    ),
    Divergence(
        "schema-validation-configs",
        "Strata's topics take Confluent Server's schema validation configs (confluent.{key,value}."
        "schema.validation and .subject.name.strategy), Redpanda's aliases and Strata's validation level, "
        "and list them with their defaults: every agent serves a schema registry and checks records "
        "against it. Kafka's broker has no registry and no such configs.",
        (
            "*/configs/confluent.*.schema.validation",
            "*/configs/confluent.*.subject.name.strategy",
            "*/configs/redpanda.*.schema.id.validation",
            "*/configs/redpanda.*.subject.name.strategy",
            "*/configs/strata.*.schema.validation.level",
        ),
    ),
    Divergence(
        "lake-configs",
        "Strata's topics take and list the strata.iceberg.* configs, which keep a topic as an Apache Iceberg "
        "table (mode: raw or typed from the schema registry, table, commit interval, partition spec, "
        "backfill, delete with topic, invalid record action, retention hold, snapshot retention, upsert "
        "and its buckets). Kafka's broker has no such configs.",
        ("*/configs/strata.iceberg.*",),
    ),
    Divergence(
        "flush-class-config",
        "Strata's topics take and list strata.flush.class (standard or low-latency: how long a topic's "
        "records wait for others to share their flush's PUT), with the agent's default class as the "
        "default. Kafka's broker writes to local disk and has no such config.",
        ("*/configs/strata.flush.class",),
    ),
    Divergence(
        "kraft-min-insync",
        "A KRaft controller formatted with --standalone writes min.insync.replicas=1 as a cluster default, "
        "so Kafka reports it from DYNAMIC_DEFAULT_BROKER_CONFIG; Strata's is Kafka's default, 1, from "
        "DEFAULT_CONFIG.",
        ("*/configs/min.insync.replicas/config_source",),
    ),
    Divergence(
        "unknown-codec",
        "A batch with compression codec 5-7 gets UNSUPPORTED_COMPRESSION_TYPE from Strata; Kafka's broker "
        "fails it with UNKNOWN_SERVER_ERROR.",
        ("bad-batches/codec 7/*/error_code",),
    ),
    Divergence(
        "undecompressable-batch",
        "A batch whose compressed bytes do not decompress gets CORRUPT_MESSAGE from Strata, naming the "
        "problem; Kafka's broker fails it with UNKNOWN_SERVER_ERROR.",
        ("bad-batches/codec gzip, bytes plain/*/error_code",),
    ),
    Divergence(
        "trailing-bytes",
        "Strata refuses a Produce whose records end in bytes that are not a whole batch; Kafka's broker "
        "ignores a tail shorter than a batch header and stores the batches before it.",
        ("bad-batches/trailing garbage*",),
    ),
    Divergence(
        "negative-timestamps",
        "Strata refuses record timestamps below 0 (INVALID_TIMESTAMP): every reader it serves (the HTTP "
        "API's ISO times, Spark's timestamp column) must be able to represent them. Kafka stores them.",
        ("bad-batches/negative timestamp*",),
    ),
    Divergence(
        "max-timestamp-below-log-start",
        "After DeleteRecords removes every record, Kafka's ListOffsets MAX_TIMESTAMP still answers the "
        "deleted record with the largest timestamp (its segment is still on disk); Strata answers only "
        "from records at or above the log start offset, so -1.",
        ("delete-records/after -1 at -3/*",),
    ),
    Divergence(
        "refused-log-start",
        "For a partition whose batches are refused (a record validation error, an out-of-order sequence) "
        "Strata answers log_start_offset -1 (unknown), as for every failed partition; Kafka fills it in "
        "for those errors. Kafka's Java producer reads it only after UNKNOWN_PRODUCER_ID, which Strata "
        "never answers (it accepts an unknown producer at any sequence).",
        (
            "bad-batches/*/log_start_offset",
            "idempotent-producer/gap/*/log_start_offset",
        ),
    ),
    Divergence(
        "config-synonyms",
        "Strata's topic configs default to Kafka's defaults directly, not to broker settings in a "
        "server.properties file, so DescribeConfigs lists no synonyms; Kafka lists the topic override or "
        "the broker setting (log.segment.bytes, ...) a default comes from.",
        ("topic-configs/describe with synonyms/*/synonyms",),
    ),
    Divergence(
        "duplicate-append-time",
        "For a duplicate idempotent batch Kafka returns the stored batch's timestamp as log_append_time_ms "
        "even on a CreateTime topic; Strata returns -1, as for every CreateTime answer.",
        ("idempotent-producer/duplicate/*/log_append_time_ms",),
    ),
)
