"""The topic configs of validation on produce (storage/topic_config.py): Confluent's names, Redpanda's
aliases and Strata's level, validated as Kafka validates configs, read into ``TopicConfig``, and set and
shown through the Kafka admin APIs (CreateTopics, AlterConfigs, IncrementalAlterConfigs,
DescribeConfigs with each config's type)."""

from __future__ import annotations

import pytest

from broker import errors
from storage.errors import InvalidConfig
from storage.topic_config import TopicConfig, effective_configs, subject_strategy, validate_configs
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

FULL = "io.confluent.kafka.serializers.subject."
BOOLEAN, STRING = 1, 2  # DescribeConfigs v3+ config types


def test_defaults_validate_nothing() -> None:
    config = TopicConfig.from_overrides({})
    assert not config.schema_validation
    assert (config.value_subject_strategy, config.value_validation_level) == ("TopicNameStrategy", "id")
    shown = effective_configs({})
    assert shown["confluent.key.schema.validation"] == "false"
    assert shown["confluent.value.subject.name.strategy"] == FULL + "TopicNameStrategy"
    assert shown["redpanda.value.subject.name.strategy"] == "TopicNameStrategy"
    assert shown["strata.value.schema.validation.level"] == "id"


@pytest.mark.parametrize(
    ("raw", "short"),
    [
        ("TopicNameStrategy", "TopicNameStrategy"),
        (FULL + "RecordNameStrategy", "RecordNameStrategy"),
        ("TopicRecordNameStrategy", "TopicRecordNameStrategy"),
    ],
)
def test_strategies_by_short_or_full_name(raw: str, short: str) -> None:
    assert subject_strategy(raw) == short
    config = TopicConfig.from_overrides({"confluent.key.subject.name.strategy": raw})
    assert config.key_subject_strategy == short


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("confluent.value.schema.validation", "yes"),
        ("redpanda.key.schema.id.validation", "1"),
        ("confluent.value.subject.name.strategy", "topicnamestrategy"),
        ("confluent.value.subject.name.strategy", FULL + "Nope"),
        ("redpanda.key.subject.name.strategy", "com.example.TopicNameStrategy"),
        ("strata.value.schema.validation.level", "PAYLOAD"),
        ("strata.key.schema.validation.level", "full"),
    ],
)
def test_bad_values_are_refused(name: str, value: str) -> None:
    with pytest.raises(InvalidConfig, match=name):
        validate_configs({name: value})


def test_an_alias_pair_is_one_setting() -> None:
    on = TopicConfig.from_overrides({"redpanda.value.schema.id.validation": "TRUE"})
    assert (on.value_schema_validation, on.key_schema_validation) == (True, False)
    both = {
        "confluent.key.schema.validation": "true",
        "redpanda.key.schema.id.validation": "True",
        "confluent.key.subject.name.strategy": FULL + "RecordNameStrategy",
        "redpanda.key.subject.name.strategy": "RecordNameStrategy",
    }
    assert validate_configs(both) == both
    with pytest.raises(InvalidConfig, match="disagree"):
        validate_configs({**both, "redpanda.key.schema.id.validation": "false"})
    with pytest.raises(InvalidConfig, match="disagree"):
        validate_configs({**both, "redpanda.key.subject.name.strategy": "TopicNameStrategy"})


async def test_set_and_described_over_the_kafka_admin_apis(broker_parts: BrokerParts) -> None:
    configs = {"confluent.value.schema.validation": "true", "strata.value.schema.validation.level": "payload"}
    created = await call(broker_parts.ctx, create_request("validated", 1, 1, configs))
    assert created.topics[0].error_code == errors.NONE
    answer = await call(broker_parts.ctx, describe_request(TOPIC, "validated"))
    entries = {c.name: (c.value, c.config_source, c.config_type) for c in answer.results[0].configs}
    assert entries["confluent.value.schema.validation"] == ("true", DYNAMIC_TOPIC_CONFIG, BOOLEAN)
    assert entries["redpanda.value.schema.id.validation"] == ("false", DEFAULT_CONFIG, BOOLEAN)
    assert entries["strata.value.schema.validation.level"] == ("payload", DYNAMIC_TOPIC_CONFIG, STRING)
    assert entries["confluent.key.subject.name.strategy"] == (
        FULL + "TopicNameStrategy",
        DEFAULT_CONFIG,
        STRING,
    )

    # Incremental: the alias set the other way, in a request of its own, disagrees with what is stored.
    clash = await call(
        broker_parts.ctx,
        incremental_request("validated", [("redpanda.value.schema.id.validation", SET, "false")]),
    )
    assert clash.responses[0].error_code == errors.INVALID_CONFIG
    same = await call(
        broker_parts.ctx,
        incremental_request("validated", [("redpanda.value.schema.id.validation", SET, "true")]),
    )
    assert same.responses[0].error_code == errors.NONE
    assert TopicConfig.from_overrides(
        broker_parts.metadata.get_topic("validated").configs
    ).value_schema_validation
    refused = await call(
        broker_parts.ctx,
        create_request("clashing", 1, 1, {**configs, "redpanda.value.schema.id.validation": "false"}),
    )
    assert refused.topics[0].error_code == errors.INVALID_CONFIG
