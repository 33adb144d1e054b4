"""The flush class as Kafka's admin and producer clients see it (agents/flush_policy.py): DescribeConfigs
shows ``strata.flush.class`` with the agent's default, AlterConfigs sets it with its validation, and a
librdkafka producer to a low-latency topic is acknowledged long before a standard topic's flush interval
on the same agent (a minute here, so that timing alone cannot decide the test).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

pytestmark = pytest.mark.integration

CLASS = "strata.flush.class"


def test_describe_and_alter_the_flush_class(kafka_factory: Callable[..., Any]) -> None:
    with kafka_factory() as broker:  # a local directory: the agent's default class is low-latency
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("fc", num_partitions=1)])["fc"].result(10)
        resource = ConfigResource(ConfigResource.Type.TOPIC, "fc")
        entry = admin.describe_configs([resource])[resource].result(10)[CLASS]
        assert (entry.value, entry.is_default) == ("low-latency", True)

        def alter(value: str) -> None:
            op = ConfigEntry(CLASS, value, incremental_operation=AlterConfigOpType.SET)
            change = ConfigResource(ConfigResource.Type.TOPIC, "fc", incremental_configs=[op])
            admin.incremental_alter_configs([change])[change].result(10)

        alter("standard")
        entry = admin.describe_configs([resource])[resource].result(10)[CLASS]
        assert (entry.value, entry.is_default) == ("standard", False)
        with pytest.raises(KafkaException, match="INVALID_CONFIG"):
            alter("fastest")
        assert dict(broker.runtime.metadata.get_topic("fc").configs) == {CLASS: "standard"}


def test_a_low_latency_topic_is_acknowledged_before_the_standard_interval(
    kafka_factory: Callable[..., Any],
) -> None:
    with kafka_factory(flush_interval_ms=60_000, flush_idle_ms=0, flush_class="standard") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics = [NewTopic("slow", num_partitions=1), NewTopic("quick", 1, config={CLASS: "low-latency"})]
        for future in admin.create_topics(topics).values():
            future.result(10)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
        acked: dict[str, float] = {}

        def report(err: Any, msg: Any) -> None:
            assert err is None, err
            acked[msg.topic()] = time.monotonic()

        sent = time.monotonic()
        producer.produce("quick", b"q", on_delivery=report)
        while "quick" not in acked and time.monotonic() < sent + 30:
            producer.poll(0.05)
        assert "quick" in acked, "the low-latency topic waited for the standard interval"
        # A standard record alone waits for the interval (or the agent's close, which flushes it).
        producer.produce("slow", b"s", on_delivery=report)
        waited = time.monotonic() + 1.0
        while time.monotonic() < waited:
            producer.poll(0.05)
        assert "slow" not in acked
        registry = broker.runtime.metrics.registry
        assert registry.get_sample_value("strata_flush_puts_total", {"class": "low-latency"}) == 1
        assert registry.get_sample_value("strata_flush_puts_total", {"class": "standard"}) == 0
