"""The Kafka handlers called directly (no socket), on a context of real parts (tests/fixtures/broker.py):
ApiVersions, Metadata, topic administration and configs.

Offsets, producer ids and the coordinator: test_broker_handlers_offsets.py; groups and authorization:
test_broker_handlers_groups.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from kafka.protocol.admin.configs import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from kafka.protocol.admin.topics import CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.protocol.metadata.metadata import MetadataRequest

from broker import apis, errors
from storage.errors import UnknownTopic
from tests.fixtures.broker import BrokerParts, call

TOPIC, BROKER = 2, 4  # DescribeConfigs resource types
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5  # config sources
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs operations


# --- ApiVersions ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 3, 4])
async def test_api_versions_advertise_exactly_the_table_in_key_order(
    broker_parts: BrokerParts, version: int
) -> None:
    request = (
        ApiVersionsRequest[version](client_software_name="t", client_software_version="1")
        if version >= 3
        else ApiVersionsRequest[version]()
    )
    answer = await call(broker_parts.ctx, request)
    assert answer.error_code == errors.NONE
    advertised = [(k.api_key, k.min_version, k.max_version) for k in answer.api_keys]
    assert advertised == sorted((a.key, a.min_version, a.max_version) for a in apis.TABLE.values())
    assert [key for key, _, _ in advertised] == list(apis.TABLE)  # the table's rows are in key order
    # Only the APIs the connection serves in order with the requests around it have no handler.
    unhandled = {a.key for a in apis.TABLE.values() if a.handler is None}
    assert unhandled == {apis.PRODUCE, apis.SASL_HANDSHAKE, apis.SASL_AUTHENTICATE}


# --- Metadata -------------------------------------------------------------------------------------------
def metadata_request(*names: str, auto_create: bool = True, version: int = 12) -> Any:
    topics = [MetadataRequest.MetadataRequestTopic(name=n) for n in names]
    return MetadataRequest[version](topics=topics, allow_auto_topic_creation=auto_create)


async def test_metadata_describes_known_topics_and_refuses_unknown_ones(broker_parts: BrokerParts) -> None:
    info = broker_parts.metadata.create_topic("known", 2, {}, 0)
    answer = await call(broker_parts.ctx, metadata_request("known", "missing"))
    assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [(5, "127.0.0.1", 9092)]
    assert (answer.cluster_id, answer.controller_id) == ("strata", 5)
    known, missing = answer.topics
    assert (known.name, known.error_code, known.topic_id) == (
        "known",
        errors.NONE,
        broker_parts.ctx.topic_id(info),
    )
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes) for p in known.partitions] == [
        (0, 5, -1, [5]),
        (1, 5, -1, [5]),
    ]
    assert (missing.name, missing.error_code, missing.partitions) == (
        "missing",
        errors.UNKNOWN_TOPIC_OR_PARTITION,
        [],
    )
    # The client allowed auto-creation, but the listener's auto.create.topics.enable is off.
    assert broker_parts.metadata.list_topics() == ["known"]


async def test_metadata_without_topics_lists_every_topic(broker_parts: BrokerParts) -> None:
    for name in ("b", "a"):
        broker_parts.metadata.create_topic(name, 1, {}, 0)
    answer = await call(broker_parts.ctx, MetadataRequest[12](topics=None, allow_auto_topic_creation=False))
    assert sorted(t.name for t in answer.topics) == ["a", "b"]
    assert all(t.error_code == errors.NONE for t in answer.topics)


async def test_metadata_refuses_a_bad_name_and_auto_creates_when_enabled(broker_parts: BrokerParts) -> None:
    ctx = replace(broker_parts.ctx, config=replace(broker_parts.ctx.config, auto_create_topics=True))
    answer = await call(ctx, metadata_request("bad/name", "created"))
    bad, created = answer.topics
    assert bad.error_code == errors.INVALID_TOPIC_EXCEPTION
    assert (created.error_code, len(created.partitions)) == (errors.NONE, 3)  # num.partitions
    assert broker_parts.metadata.get_topic("created").partitions == 3
    # A client that does not allow it (v4+) creates nothing, even here.
    answer = await call(ctx, metadata_request("not-created", auto_create=False))
    assert answer.topics[0].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION


# --- CreateTopics, DeleteTopics, CreatePartitions -------------------------------------------------------
def create_request(
    name: str, partitions: int = 1, replication: int = 1, configs: dict[str, str] | None = None, **kw: Any
) -> Any:
    topic = CreateTopicsRequest.CreatableTopic
    return CreateTopicsRequest[5](
        topics=[
            topic(
                name=name,
                num_partitions=partitions,
                replication_factor=replication,
                assignments=[],
                configs=[topic.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
            )
        ],
        timeout_ms=1000,
        validate_only=kw.get("validate_only", False),
    )


async def test_create_topics_creates_with_configs_and_reports_them(broker_parts: BrokerParts) -> None:
    answer = await call(broker_parts.ctx, create_request("orders", 4, -1, {"cleanup.policy": "compact"}))
    (created,) = answer.topics
    assert (created.error_code, created.num_partitions, created.replication_factor) == (errors.NONE, 4, 1)
    info = broker_parts.metadata.get_topic("orders")
    assert (info.partitions, dict(info.configs)) == (4, {"cleanup.policy": "compact"})
    assert info.created_ms == broker_parts.clock.now_ms()  # the context's clock, not the wall's
    shown = {c.name: (c.value, c.config_source) for c in created.configs}
    assert shown["cleanup.policy"] == ("compact", DYNAMIC_TOPIC_CONFIG)
    assert shown["retention.ms"] == (str(7 * 24 * 3600 * 1000), DEFAULT_CONFIG)
    # Again: the topic exists.
    again = await call(broker_parts.ctx, create_request("orders"))
    assert again.topics[0].error_code == errors.TOPIC_ALREADY_EXISTS


async def test_create_topics_validate_only_creates_nothing(broker_parts: BrokerParts) -> None:
    answer = await call(broker_parts.ctx, create_request("dry", 2, validate_only=True))
    assert (answer.topics[0].error_code, answer.topics[0].num_partitions) == (errors.NONE, 2)
    with pytest.raises(UnknownTopic):
        broker_parts.metadata.get_topic("dry")


async def test_create_topics_default_partition_count(broker_parts: BrokerParts) -> None:
    answer = await call(broker_parts.ctx, create_request("defaulted", -1))
    assert answer.topics[0].num_partitions == 3
    assert broker_parts.metadata.get_topic("defaulted").partitions == 3


@pytest.mark.parametrize(
    ("name", "partitions", "replication", "configs", "code"),
    [
        ("bad name", 1, 1, {}, errors.INVALID_TOPIC_EXCEPTION),
        ("..", 1, 1, {}, errors.INVALID_TOPIC_EXCEPTION),
        ("x" * 250, 1, 1, {}, errors.INVALID_TOPIC_EXCEPTION),
        ("zero", 0, 1, {}, errors.INVALID_PARTITIONS),
        ("no-replicas", 1, 0, {}, errors.INVALID_REPLICATION_FACTOR),
        ("bad-config", 1, 1, {"retention.ms": "soon"}, errors.INVALID_CONFIG),
        ("unknown-config", 1, 1, {"no.such.config": "1"}, errors.INVALID_CONFIG),
    ],
)
async def test_create_topics_refusals(
    broker_parts: BrokerParts,
    name: str,
    partitions: int,
    replication: int,
    configs: dict[str, str],
    code: int,
) -> None:
    answer = await call(broker_parts.ctx, create_request(name, partitions, replication, configs))
    (refused,) = answer.topics
    assert (refused.name, refused.error_code, refused.num_partitions) == (name, code, -1)
    assert refused.error_message
    assert broker_parts.metadata.list_topics() == []


async def test_delete_topics(broker_parts: BrokerParts) -> None:
    broker_parts.metadata.create_topic("doomed", 1, {}, 0)
    answer = await call(
        broker_parts.ctx, DeleteTopicsRequest[4](topic_names=["doomed", "never", "bad name"], timeout_ms=1000)
    )
    codes = {r.name: r.error_code for r in answer.responses}
    assert codes == {
        "doomed": errors.NONE,
        "never": errors.UNKNOWN_TOPIC_OR_PARTITION,
        "bad name": errors.INVALID_TOPIC_EXCEPTION,
    }
    assert broker_parts.metadata.list_topics() == []


def partitions_request(name: str, count: int, validate_only: bool = False) -> Any:
    return CreatePartitionsRequest[3](
        topics=[CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=count, assignments=None)],
        timeout_ms=1000,
        validate_only=validate_only,
    )


async def test_create_partitions_grows_and_validates(broker_parts: BrokerParts) -> None:
    broker_parts.metadata.create_topic("grown", 2, {}, 0)
    dry = await call(broker_parts.ctx, partitions_request("grown", 7, validate_only=True))
    assert dry.results[0].error_code == errors.NONE
    assert broker_parts.metadata.get_topic("grown").partitions == 2
    grown = await call(broker_parts.ctx, partitions_request("grown", 5))
    assert (grown.results[0].name, grown.results[0].error_code) == ("grown", errors.NONE)
    assert broker_parts.metadata.get_topic("grown").partitions == 5
    for validate_only in (True, False):
        shrink = await call(broker_parts.ctx, partitions_request("grown", 3, validate_only))
        assert shrink.results[0].error_code == errors.INVALID_PARTITIONS
        assert shrink.results[0].error_message
    assert broker_parts.metadata.get_topic("grown").partitions == 5
    unknown = await call(broker_parts.ctx, partitions_request("never", 3))
    assert unknown.results[0].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    bad = await call(broker_parts.ctx, partitions_request("bad name", 3))
    assert bad.results[0].error_code == errors.INVALID_TOPIC_EXCEPTION


# --- DescribeConfigs, AlterConfigs, IncrementalAlterConfigs ---------------------------------------------
def describe_request(resource_type: int, name: str, keys: list[str] | None = None) -> Any:
    resource = DescribeConfigsRequest.DescribeConfigsResource
    return DescribeConfigsRequest[4](
        resources=[resource(resource_type=resource_type, resource_name=name, configuration_keys=keys)],
        include_synonyms=False,
        include_documentation=False,
    )


async def test_describe_configs_of_a_topic(broker_parts: BrokerParts) -> None:
    broker_parts.metadata.create_topic("described", 1, {"retention.ms": "1000"}, 0)
    answer = await call(broker_parts.ctx, describe_request(TOPIC, "described"))
    (result,) = answer.results
    assert (result.error_code, result.resource_name) == (errors.NONE, "described")
    entries = {c.name: (c.value, c.config_source, c.read_only) for c in result.configs}
    assert entries["retention.ms"] == ("1000", DYNAMIC_TOPIC_CONFIG, False)
    assert entries["cleanup.policy"] == ("delete", DEFAULT_CONFIG, False)
    only = await call(broker_parts.ctx, describe_request(TOPIC, "described", ["cleanup.policy", "nope"]))
    assert [c.name for c in only.results[0].configs] == ["cleanup.policy"]
    missing = await call(broker_parts.ctx, describe_request(TOPIC, "never"))
    assert (missing.results[0].error_code, missing.results[0].configs) == (
        errors.UNKNOWN_TOPIC_OR_PARTITION,
        [],
    )


async def test_describe_configs_of_the_broker_and_of_other_resources(broker_parts: BrokerParts) -> None:
    answer = await call(broker_parts.ctx, describe_request(BROKER, "5"))
    entries = {c.name: (c.value, c.config_source, c.read_only) for c in answer.results[0].configs}
    assert entries == {
        "auto.create.topics.enable": ("false", STATIC_BROKER_CONFIG, True),
        "num.partitions": ("3", STATIC_BROKER_CONFIG, True),
        "socket.request.max.bytes": (str(100 * 1024 * 1024), STATIC_BROKER_CONFIG, True),
    }
    other = await call(broker_parts.ctx, describe_request(8, "someone"))  # 8: a broker logger
    assert other.results[0].error_code == errors.INVALID_REQUEST


def alter_request(resource_type: int, name: str, configs: dict[str, str], validate_only: bool = False) -> Any:
    resource = AlterConfigsRequest.AlterConfigsResource
    return AlterConfigsRequest[2](
        resources=[
            resource(
                resource_type=resource_type,
                resource_name=name,
                configs=[resource.AlterableConfig(name=k, value=v) for k, v in configs.items()],
            )
        ],
        validate_only=validate_only,
    )


async def test_alter_configs_replaces_every_override(broker_parts: BrokerParts) -> None:
    broker_parts.metadata.create_topic("altered", 1, {"retention.ms": "1000", "cleanup.policy": "compact"}, 0)
    dry = await call(broker_parts.ctx, alter_request(TOPIC, "altered", {"retention.ms": "5000"}, True))
    assert dry.responses[0].error_code == errors.NONE
    assert dict(broker_parts.metadata.get_topic("altered").configs)["retention.ms"] == "1000"
    answer = await call(broker_parts.ctx, alter_request(TOPIC, "altered", {"retention.ms": "5000"}))
    assert (answer.responses[0].error_code, answer.responses[0].resource_name) == (errors.NONE, "altered")
    # cleanup.policy, not named, returns to its default.
    assert dict(broker_parts.metadata.get_topic("altered").configs) == {"retention.ms": "5000"}
    bad = await call(broker_parts.ctx, alter_request(TOPIC, "altered", {"retention.ms": "soon"}))
    assert bad.responses[0].error_code == errors.INVALID_CONFIG
    broker = await call(broker_parts.ctx, alter_request(BROKER, "5", {"num.partitions": "9"}))
    assert broker.responses[0].error_code == errors.INVALID_CONFIG
    missing = await call(broker_parts.ctx, alter_request(TOPIC, "never", {"retention.ms": "1"}))
    assert missing.responses[0].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
    assert dict(broker_parts.metadata.get_topic("altered").configs) == {"retention.ms": "5000"}


def incremental_request(
    name: str, ops: list[tuple[str, int, str | None]], validate_only: bool = False
) -> Any:
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    return IncrementalAlterConfigsRequest[1](
        resources=[
            resource(
                resource_type=TOPIC,
                resource_name=name,
                configs=[resource.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops],
            )
        ],
        validate_only=validate_only,
    )


async def test_incremental_alter_configs(broker_parts: BrokerParts) -> None:
    broker_parts.metadata.create_topic("inc", 1, {"retention.ms": "1000"}, 0)

    async def alter(ops: list[tuple[str, int, str | None]], validate_only: bool = False) -> int:
        answer = await call(broker_parts.ctx, incremental_request("inc", ops, validate_only))
        code: int = answer.responses[0].error_code
        return code

    def configs() -> dict[str, str]:
        return dict(broker_parts.metadata.get_topic("inc").configs)

    assert await alter([("cleanup.policy", APPEND, "compact")], validate_only=True) == errors.NONE
    assert configs() == {"retention.ms": "1000"}
    assert await alter([("cleanup.policy", APPEND, "compact"), ("retention.ms", DELETE, None)]) == errors.NONE
    assert configs() == {"cleanup.policy": "delete,compact"}
    assert await alter([("cleanup.policy", SUBTRACT, "delete"), ("max.message.bytes", SET, "2048")]) == 0
    assert configs() == {"cleanup.policy": "compact", "max.message.bytes": "2048"}
    # APPEND on a config that is not a list, or one bad operation among good ones: nothing is applied.
    assert await alter([("retention.ms", APPEND, "5")]) == errors.INVALID_CONFIG
    assert (
        await alter([("retention.ms", SET, "5"), ("cleanup.policy", SET, "sometimes")])
        == errors.INVALID_CONFIG
    )
    assert configs() == {"cleanup.policy": "compact", "max.message.bytes": "2048"}
