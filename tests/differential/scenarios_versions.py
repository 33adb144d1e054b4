"""Every version of the common requests, both brokers serve: the same question asked at each version
both sides accept, so a version whose encoding or defaults differ shows up on its own."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin.configs import DescribeConfigsRequest
from kafka.protocol.admin.groups import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.offsets import ListOffsetsRequest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest

from tests.differential.base import Answers, batch, create_topic, produce, scenario
from tests.differential.scenarios_groups import find_coordinator
from tests.differential.wire import Side


def _versions(side: Side, api: Any) -> range:
    """The versions both brokers advertise (Kafka 4 advertises Produce v0-2 and closes the connection on
    them, KIP-896; Strata advertises from v3)."""
    key = api.API_KEY
    return range(max(side.common_min[key], api.min_version), side.common[key] + 1)


@scenario(quick=False)
def every_version(side: Side, prefix: str) -> Answers:
    """Produce, Fetch, ListOffsets, Metadata, DescribeConfigs and the group listings at every version."""
    t = f"{prefix}-ver"
    out: Answers = {"create": create_topic(side, t, 1)}
    for v in _versions(side, ProduceRequest):
        out[f"produce v{v}"] = produce(side, t, 0, batch([f"v{v}".encode()]), version=v)
    for v in _versions(side, FetchRequest):
        out[f"fetch v{v}"] = side.call(FetchRequest, _fetch(t, v), v)
    for v in _versions(side, ListOffsetsRequest):
        out[f"list offsets v{v}"] = side.call(ListOffsetsRequest, _list_offsets(t), v)
    for v in _versions(side, MetadataRequest):
        out[f"metadata v{v}"] = side.call(MetadataRequest, _metadata(t, v), v)
    for v in _versions(side, DescribeConfigsRequest):
        out[f"describe configs v{v}"] = side.call(DescribeConfigsRequest, _describe_configs(t, v), v)
    find_coordinator(side, f"{prefix}-nogroup")
    absent = {"groups": [f"{prefix}-nogroup"], "include_authorized_operations": False}
    for v in _versions(side, DescribeGroupsRequest):
        out[f"describe groups v{v}"] = side.call(DescribeGroupsRequest, absent, v)
    for v in _versions(side, ListGroupsRequest):
        got = side.call(ListGroupsRequest, {"states_filter": [], "types_filter": []}, v)
        got["groups"] = [g for g in got["groups"] if g["group_id"].startswith(prefix)]
        out[f"list groups v{v}"] = got
    return out


def _fetch(topic: str, version: int) -> dict[str, Any]:
    partition = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1}
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [partition | {"partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def _list_offsets(topic: str) -> dict[str, Any]:
    partitions = [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2, "max_num_offsets": 1}]
    return {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": partitions}]}


def _metadata(topic: str, version: int) -> dict[str, Any]:
    return {
        "topics": [{"name": topic}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


def _describe_configs(topic: str, version: int) -> dict[str, Any]:
    keys = ["retention.ms", "cleanup.policy", "max.message.bytes"]
    resources = [{"resource_type": 2, "resource_name": topic, "configuration_keys": keys}]
    return {"resources": resources, "include_synonyms": False, "include_documentation": False}
