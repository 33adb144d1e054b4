"""Topic administration from Kafka's admin clients: configs, partitions, and the same rules as HTTP."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic

from storage.partitioner import partition_for_key
from tests.fixtures.kafka import RunningBroker

pytestmark = pytest.mark.integration


def test_confluent_admin_configs_and_partitions(broker: RunningBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = NewTopic("cfg", num_partitions=2, replication_factor=1, config={"retention.ms": "1000"})
    admin.create_topics([topic])["cfg"].result(10)
    bad = NewTopic("bad", num_partitions=1, replication_factor=1, config={"retention.ms": "soon"})
    with pytest.raises(KafkaException, match="INVALID_CONFIG"):
        admin.create_topics([bad])["bad"].result(10)
    with pytest.raises(KafkaException):  # validate_only still validates
        admin.create_topics([NewTopic("x", num_partitions=0)], validate_only=True)["x"].result(10)
    admin.create_topics([NewTopic("dry", num_partitions=1)], validate_only=True)["dry"].result(10)
    assert "dry" not in admin.list_topics(timeout=10).topics

    resource = ConfigResource(ConfigResource.Type.TOPIC, "cfg")
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "1000"
    assert configs["retention.ms"].source == ConfigResource.Type.TOPIC.value - 1  # DYNAMIC_TOPIC_CONFIG = 1
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].is_default

    changes = ConfigResource(
        ConfigResource.Type.TOPIC,
        "cfg",
        incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
            ConfigEntry("min.cleanable.dirty.ratio", "0.1", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin.incremental_alter_configs([changes])[changes].result(10)
    info = broker.runtime.metadata.get_topic("cfg")
    assert dict(info.configs) == {"cleanup.policy": "delete,compact", "min.cleanable.dirty.ratio": "0.1"}
    refused = ConfigResource(
        ConfigResource.Type.TOPIC,
        "cfg",
        incremental_configs=[
            ConfigEntry("max.message.bytes", "-5", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException):
        admin.incremental_alter_configs([refused])[refused].result(10)
    assert dict(broker.runtime.metadata.get_topic("cfg").configs) == dict(info.configs)  # nothing changed

    admin.create_partitions([NewPartitions("cfg", 5)])["cfg"].result(10)
    assert broker.runtime.metadata.get_topic("cfg").partitions == 5
    assert len(admin.list_topics(timeout=10).topics["cfg"].partitions) == 5
    with pytest.raises(KafkaException):  # shrinking is refused
        admin.create_partitions([NewPartitions("cfg", 3)])["cfg"].result(10)


def test_kafka_python_admin_describe_configs_and_partitions(broker: RunningBroker) -> None:
    broker.runtime.metadata.create_topic("kpcfg", 1, {"cleanup.policy": "compact"}, 0)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        response = admin.describe_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, "kpcfg")], config_filter="all"
        )
        entries = response["topic"]["kpcfg"]
        assert entries["cleanup.policy"]["value"] == "compact"
        assert entries["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert entries["max.message.bytes"]["value"] == "1048588"
        assert entries["max.message.bytes"]["config_source"] == "DEFAULT_CONFIG"
        admin.create_partitions({"kpcfg": KpNewPartitions(total_count=3)})
    finally:
        admin.close()
    assert broker.runtime.metadata.get_topic("kpcfg").partitions == 3


def test_keyed_records_follow_murmur2_over_the_new_count(broker: RunningBroker) -> None:
    """After CreatePartitions, a Java-style (murmur2) producer places keys over the new count; Strata's
    own HTTP partitioner (murmur2) agrees for the same key."""
    from kafka import KafkaProducer

    broker.runtime.metadata.create_topic("grow", 1, {}, 0)
    broker.runtime.metadata.add_partitions("grow", 4)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
    try:
        for key in (b"alpha", b"beta", b"gamma", b"delta"):
            meta = producer.send("grow", key=key, value=b"v").get(10)
            assert meta.partition == partition_for_key(key, 4)
    finally:
        producer.close()


def legacy(call: Any) -> Any:
    """confluent-kafka warns that alter_configs is deprecated (it is Kafka's legacy API, still served)."""

    def quiet(*args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return call(*args, **kwargs)

    return quiet


def test_legacy_alter_configs_replaces_the_whole_set(broker: RunningBroker) -> None:
    """AlterConfigs (key 33), which librdkafka's alter_configs and kafka-python's use: the configs named
    are set and every other override returns to its default, as in Kafka."""
    broker.runtime.metadata.create_topic(
        "legacy", 1, {"retention.ms": "1000", "cleanup.policy": "compact"}, 0
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    replace = ConfigResource(
        ConfigResource.Type.TOPIC, "legacy", set_config={"min.cleanable.dirty.ratio": "0.2"}
    )
    admin.alter_configs = legacy(admin.alter_configs)  # type: ignore[method-assign]
    admin.alter_configs([replace], validate_only=True)[replace].result(10)
    assert dict(broker.runtime.metadata.get_topic("legacy").configs) == {
        "retention.ms": "1000",
        "cleanup.policy": "compact",
    }
    admin.alter_configs([replace])[replace].result(10)
    assert dict(broker.runtime.metadata.get_topic("legacy").configs) == {"min.cleanable.dirty.ratio": "0.2"}

    bad = ConfigResource(ConfigResource.Type.TOPIC, "legacy", set_config={"retention.ms": "soon"})
    with pytest.raises(KafkaException, match="INVALID_CONFIG"):
        admin.alter_configs([bad])[bad].result(10)
    assert dict(broker.runtime.metadata.get_topic("legacy").configs) == {"min.cleanable.dirty.ratio": "0.2"}

    # kafka-python over AlterConfigs (incremental=False) describes the topic first and sends every dynamic
    # config along, since the legacy API resets what it omits: the result is a merge.
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        kp.alter_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, "legacy", configs={"retention.ms": "5000"})],
            incremental=False,
        )
    finally:
        kp.close()
    assert dict(broker.runtime.metadata.get_topic("legacy").configs) == {
        "min.cleanable.dirty.ratio": "0.2",
        "retention.ms": "5000",
    }


def test_manual_replica_assignment_is_checked_as_kafka_does(broker: RunningBroker) -> None:
    """librdkafka's 0081 creates topics with replica assignments: n entries give n partitions, and every
    replica must be a broker id this agent shows (here 0); the replicas themselves mean nothing."""
    from kafka.errors import InvalidReplicationAssignmentError

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assigned = KpNewTopic(
            "assigned", num_partitions=-1, replication_factor=-1, replica_assignments={0: [0], 1: [0], 2: [0]}
        )
        admin.create_topics([assigned])
        assert broker.runtime.metadata.get_topic("assigned").partitions == 3
        elsewhere = KpNewTopic(
            "elsewhere", num_partitions=-1, replication_factor=-1, replica_assignments={0: [7]}
        )
        with pytest.raises(InvalidReplicationAssignmentError):
            admin.create_topics([elsewhere])
    finally:
        admin.close()
    assert "elsewhere" not in broker.runtime.metadata.list_topics()


def test_create_partitions_with_an_assignment(broker: RunningBroker) -> None:
    broker.runtime.metadata.create_topic("grown", 1, {}, 0)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions("grown", 3, replica_assignment=[[0], [0]])])["grown"].result(10)
    assert broker.runtime.metadata.get_topic("grown").partitions == 3
    with pytest.raises(KafkaException, match="INVALID_REPLICA_ASSIGNMENT"):
        admin.create_partitions([NewPartitions("grown", 4, replica_assignment=[[9]])])["grown"].result(10)
    assert broker.runtime.metadata.get_topic("grown").partitions == 3


def test_kafka_configs_without_effect_here_are_accepted_and_validated(broker: RunningBroker) -> None:
    """segment.bytes and the like (storage/topic_config.py NO_EFFECT_CONFIGS): tooling that sets them
    works, with Kafka's validation, and DescribeConfigs reports them."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = NewTopic(
        "segmented", num_partitions=1, config={"segment.bytes": "1048576", "preallocate": "true"}
    )
    admin.create_topics([topic])["segmented"].result(10)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "segmented")
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["segment.bytes"].value == "1048576"
    assert configs["min.insync.replicas"].value == "1"
    assert configs["min.insync.replicas"].is_default
    bad = NewTopic("tiny-segments", num_partitions=1, config={"segment.bytes": "5"})
    with pytest.raises(KafkaException, match="INVALID_CONFIG"):
        admin.create_topics([bad])["tiny-segments"].result(10)
