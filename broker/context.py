"""What every handler may use: the agent core, the metadata store, the listener's config, the clock, and
the connection's principal.

Each connection holds its own context: once SASL authenticates it, ``principal`` is set in that copy, so a
handler asks ``ctx.may(...)`` and never sees another connection's identity."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from agents.agent import Agent
from agents.buffer import ProduceBuffer
from agents.principals import Op, Principal, Principals, Resource
from broker.budget import ByteBudget
from broker.cluster import ClusterView
from broker.config import BrokerConfig
from storage.clock import Clock
from storage.errors import Forbidden, GroupForbidden
from storage.metadata.base import MetadataStore, TopicInfo

# Topic ids are derived from the topic's name and creation time, so every agent gives the same id to the
# same topic, and a topic deleted and created again gets a new one (as Kafka's Metadata v10+ expects).
_TOPIC_ID_NAMESPACE = uuid.UUID("0f4c5a3e-6d0e-4b8e-9a7d-5f3b2c1d0e9f")


UNAUTHENTICATED_BYTES = 4 * 1024 * 1024


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
    # --principals-file: every connection authenticates with SASL first, and requests are checked against
    # its principal's grants. None: no authentication, every request allowed.
    principals: Principals | None = None
    principal: Principal | None = None
    # What frames read before authentication may hold at once, over every connection: not the produce
    # buffer, which clients that never log in could otherwise fill (each frame up to 512 KiB).
    unauthenticated: ProduceBuffer = field(
        default_factory=lambda: ProduceBuffer(max_bytes=UNAUTHENTICATED_BYTES)
    )

    def may(self, op: Op, resource: Resource, name: str | None) -> bool:
        """Whether this connection's principal may do ``op`` to the topic or group ``name``."""
        if self.principals is None:
            return True
        return self.principal is not None and self.principal.may(op, resource, name)

    def require(self, op: Op, resource: Resource, name: str | None) -> None:
        """Forbidden (a topic) or GroupForbidden (a group) unless ``may``; the handlers' kafka_error turns
        them into TOPIC_/GROUP_AUTHORIZATION_FAILED."""
        if not self.may(op, resource, name):
            who = self.principal.name if self.principal is not None else "?"
            message = f"principal {who!r} may not {op.value} {resource.value[:-1]} {name!r}"
            raise Forbidden(message) if resource is Resource.TOPIC else GroupForbidden(message)

    def may_describe(self, topic: str) -> bool:
        """Describing a topic: Kafka's DESCRIBE, which its READ and WRITE imply. DescribeConfigs asks the
        same here, where Kafka asks DESCRIBE_CONFIGS (implied only by ALTER_CONFIGS): a topic's configs
        are no secret from those who may read or write it."""
        return self.may(Op.READ, Resource.TOPIC, topic) or self.may(Op.WRITE, Resource.TOPIC, topic)

    def require_describe(self, topic: str) -> None:
        if not self.may_describe(topic):
            self.require(Op.READ, Resource.TOPIC, topic)

    def may_any(self, op: Op, resource: Resource) -> bool:
        if self.principals is None:
            return True
        return self.principal is not None and self.principal.may_any(op, resource)

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
