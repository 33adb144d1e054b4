"""The ``strata.iceberg.*`` topic configs (storage/lake_config.py): validated with clear errors, read into
``LakeTopicConfig``, and set and shown through the Kafka admin APIs with their types and the table's
per-topic default."""

from __future__ import annotations

import pytest

from broker import errors
from storage.errors import InvalidConfig
from storage.lake_config import (
    LakeMode,
    LakeTopicConfig,
    PartitionTerm,
    dead_letter_table,
    default_table,
    parse_partition_spec,
    read_mode,
)
from storage.topic_config import effective_configs, validate_configs
from tests.fixtures.broker import BrokerParts, call
from tests.unit.test_broker_handlers import (
    DEFAULT_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    SET,
    TOPIC,
    create_request,
    describe_request,
    incremental_request,
)

BOOLEAN, STRING, INT, LONG = 1, 2, 3, 5  # DescribeConfigs v3+ config types


def test_defaults_keep_the_lake_off_and_name_the_table_after_the_topic() -> None:
    config = LakeTopicConfig.from_overrides("orders.eu-west", {})
    assert not config.enabled
    assert config.table == "strata.orders_eu_west" == default_table("orders.eu-west")
    assert (config.commit_interval_ms, config.backfill, config.delete_with_topic) == (
        60_000,
        "from_log_start",
        True,
    )
    assert config.partition_spec == (PartitionTerm("day", "timestamp"),)
    shown = effective_configs({}, "orders.eu-west")
    assert shown["strata.iceberg.table"] == "strata.orders_eu_west"
    assert shown["strata.iceberg.mode"] == "disabled"
    assert shown["strata.iceberg.invalid.record.action"] == config.invalid_record_action == "dlq_table"
    assert dead_letter_table(config.table) == "strata.orders_eu_west_dlq"


def test_typed_modes_take_redpandas_spelling() -> None:
    assert read_mode("raw") == LakeMode("raw")
    assert not read_mode("raw").typed
    assert read_mode("value_schema_id_prefix") == LakeMode("value_schema_id_prefix")
    latest = read_mode("value_schema_latest")
    assert latest.typed
    assert latest.value_subject("orders") == "orders-value"
    options = read_mode("value_schema_latest:subject=shared-value,protobuf_name=shop.v1.Order")
    assert options == LakeMode("value_schema_latest", "shared-value", "shop.v1.Order")
    assert options.value_subject("orders") == "shared-value"
    assert read_mode("value_schema_latest:protobuf_name=a.B").value_subject("t") == "t-value"
    config = LakeTopicConfig.from_overrides(
        "t",
        {
            "strata.iceberg.mode": "value_schema_latest:subject=s",
            "strata.iceberg.invalid.record.action": "drop",
        },
    )
    assert (config.lake_mode.subject, config.invalid_record_action) == ("s", "drop")


def test_upsert_is_on_by_default_for_compacted_topics_only() -> None:
    for policy, on in (("delete", False), ("compact", True), ("compact, delete", True)):
        overrides = {"cleanup.policy": policy}
        config = LakeTopicConfig.from_overrides("t", overrides)
        assert (config.upsert, config.upsert_buckets) == (on, 16), policy
        assert effective_configs(overrides, "t")["strata.iceberg.upsert"] == str(on).lower()
    assert not LakeTopicConfig.from_overrides("t", {}).upsert
    assert effective_configs({}, "t")["strata.iceberg.upsert.buckets"] == "16"
    chosen = {
        "cleanup.policy": "compact",
        "strata.iceberg.upsert": "false",
        "strata.iceberg.upsert.buckets": "64",
    }
    config = LakeTopicConfig.from_overrides("t", chosen)
    assert (config.upsert, config.upsert_buckets) == (False, 64)
    assert LakeTopicConfig.from_overrides("t", {"strata.iceberg.upsert": "TRUE"}).upsert


def test_partition_specs() -> None:
    assert parse_partition_spec("()") == ()
    assert parse_partition_spec("(hour(timestamp))") == (PartitionTerm("hour", "timestamp"),)
    assert parse_partition_spec(" ( day(timestamp) , bucket(16, key), partition ) ") == (
        PartitionTerm("day", "timestamp"),
        PartitionTerm("bucket", "key", 16),
        PartitionTerm("identity", "partition"),
    )


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("strata.iceberg.mode", "RAW", "expected one of disabled, raw, value_schema_id_prefix"),
        ("strata.iceberg.mode", "value_schema_id_prefix:subject=x", "takes no options"),
        ("strata.iceberg.mode", "value_schema_latest:", "subject=<subject>,protobuf_name=<message>"),
        ("strata.iceberg.mode", "value_schema_latest:schema=x", "got 'schema=x'"),
        ("strata.iceberg.mode", "value_schema_latest:subject=", "got 'subject='"),
        ("strata.iceberg.mode", "value_schema_latest:subject=a,subject=b", "repeats the option 'subject'"),
        ("strata.iceberg.invalid.record.action", "dlq", "expected one of dlq_table, drop"),
        ("strata.iceberg.table", "orders", "namespace.table"),
        ("strata.iceberg.table", "strata.or-ders", "namespace.table"),
        ("strata.iceberg.table", "strata." + "t" * 250, "at most 249"),
        ("strata.iceberg.commit.interval.ms", "9999", ">= 10000"),
        ("strata.iceberg.commit.interval.ms", "1m", "64-bit integer"),
        ("strata.iceberg.partition.spec", "day(timestamp)", "parenthesised"),
        ("strata.iceberg.partition.spec", "(day(key))", "timestamp column"),
        ("strata.iceberg.partition.spec", "(bucket(0, key))", "between 1"),
        ("strata.iceberg.partition.spec", "(minute(timestamp))", "unknown transform"),
        ("strata.iceberg.partition.spec", "(day(timestamp), day(timestamp))", "repeats"),
        ("strata.iceberg.backfill", "earliest", "from_log_start, from_now"),
        ("strata.iceberg.delete.with.topic", "yes", "true or false"),
        ("strata.iceberg.max.retention.hold.ms", "-1", "non-negative"),
        ("strata.iceberg.snapshot.retention.ms", "7d", "non-negative"),
        ("strata.iceberg.upsert", "on", "true or false"),
        ("strata.iceberg.upsert.buckets", "0", "between 1 and 1024"),
        ("strata.iceberg.upsert.buckets", "1025", "between 1 and 1024"),
        ("strata.iceberg.upsert.buckets", "-3", "between 1 and 1024"),
    ],
)
def test_bad_values_are_refused_with_the_reason(name: str, value: str, message: str) -> None:
    with pytest.raises(InvalidConfig, match=name) as caught:
        validate_configs({name: value})
    assert message in caught.value.message


async def test_set_and_described_over_the_kafka_admin_apis(broker_parts: BrokerParts) -> None:
    configs = {"strata.iceberg.mode": "raw", "strata.iceberg.partition.spec": "(hour(timestamp))"}
    created = await call(broker_parts.ctx, create_request("clicks-v2", 1, 1, configs))
    assert created.topics[0].error_code == errors.NONE
    answer = await call(broker_parts.ctx, describe_request(TOPIC, "clicks-v2"))
    entries = {c.name: (c.value, c.config_source, c.config_type) for c in answer.results[0].configs}
    assert entries["strata.iceberg.mode"] == ("raw", DYNAMIC_TOPIC_CONFIG, STRING)
    assert entries["strata.iceberg.table"] == ("strata.clicks_v2", DEFAULT_CONFIG, STRING)
    assert entries["strata.iceberg.commit.interval.ms"] == ("60000", DEFAULT_CONFIG, LONG)
    assert entries["strata.iceberg.delete.with.topic"] == ("true", DEFAULT_CONFIG, BOOLEAN)
    assert entries["strata.iceberg.invalid.record.action"] == ("dlq_table", DEFAULT_CONFIG, STRING)
    assert entries["strata.iceberg.max.retention.hold.ms"] == ("86400000", DEFAULT_CONFIG, LONG)
    assert entries["strata.iceberg.snapshot.retention.ms"] == ("604800000", DEFAULT_CONFIG, LONG)
    assert entries["strata.iceberg.upsert"] == ("false", DEFAULT_CONFIG, BOOLEAN)
    assert entries["strata.iceberg.upsert.buckets"] == ("16", DEFAULT_CONFIG, INT)
    compacted = {"strata.iceberg.mode": "raw", "cleanup.policy": "compact"}
    created = await call(broker_parts.ctx, create_request("state-v1", 1, 1, compacted))
    assert created.topics[0].error_code == errors.NONE
    answer = await call(broker_parts.ctx, describe_request(TOPIC, "state-v1"))
    entries = {c.name: (c.value, c.config_source, c.config_type) for c in answer.results[0].configs}
    assert entries["strata.iceberg.upsert"] == ("true", DEFAULT_CONFIG, BOOLEAN)

    refused = await call(
        broker_parts.ctx,
        incremental_request("clicks-v2", [("strata.iceberg.mode", SET, "value_schema_latest:name=x")]),
    )
    assert refused.responses[0].error_code == errors.INVALID_CONFIG
    assert "subject=<subject>" in refused.responses[0].error_message
    typed = [
        ("strata.iceberg.table", SET, "lake.clicks"),
        ("strata.iceberg.mode", SET, "value_schema_latest:subject=clicks-value"),
        ("strata.iceberg.invalid.record.action", SET, "drop"),
    ]
    changed = await call(broker_parts.ctx, incremental_request("clicks-v2", typed))
    assert changed.responses[0].error_code == errors.NONE
    stored = broker_parts.metadata.get_topic("clicks-v2").configs
    config = LakeTopicConfig.from_overrides("clicks-v2", stored)
    assert (config.table, config.lake_mode.subject, config.invalid_record_action) == (
        "lake.clicks",
        "clicks-value",
        "drop",
    )
