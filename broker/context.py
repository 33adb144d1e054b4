"""What every handler may use: the agent core, the metadata store, the listener's config and the clock."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from agents.agent import Agent
from broker.budget import ByteBudget
from broker.cluster import ClusterView
from broker.config import BrokerConfig
from storage.clock import Clock
from storage.metadata.base import MetadataStore, TopicInfo

# Topic ids are derived from the topic's name and creation time, so every agent gives the same id to the
# same topic, and a topic deleted and created again gets a new one (as Kafka's Metadata v10+ expects).
_TOPIC_ID_NAMESPACE = uuid.UUID("0f4c5a3e-6d0e-4b8e-9a7d-5f3b2c1d0e9f")


@dataclass(frozen=True, slots=True)
class BrokerContext:
    agent: Agent
    metadata: MetadataStore
    config: BrokerConfig
    clock: Clock
    # Shared by every connection of the listener: the bytes of Fetch answers held at once.
    fetch_budget: ByteBudget
    # The live agents as brokers, with --kafka-cluster (set by the listener once registered).
    cluster: ClusterView | None = None

    @property
    def brokers(self) -> list[tuple[int, str, int]]:
        """(broker id, host, port) of every broker shown to clients."""
        return self.cluster.brokers() if self.cluster is not None else self.config.brokers

    def leader(self, topic: str, partition: int) -> int:
        if self.cluster is not None:
            return self.cluster.leader(topic, partition)
        return self.config.leader(topic, partition)

    def topic_id(self, info: TopicInfo) -> uuid.UUID:
        return uuid.uuid5(_TOPIC_ID_NAMESPACE, f"{info.name}\x00{info.created_ms}")
