"""What every handler may use: the agent core, the metadata store, the listener's config, the clock, and
the connection's principal.

Each connection holds its own context: once SASL authenticates it, ``principal`` is set in that copy, so a
handler asks ``ctx.may(need, name)`` with a need from the permission table (agents/permissions.py) and never
sees another connection's identity."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from agents import security as access
from agents.agent import Agent
from agents.budget import ByteBudget
from agents.buffer import ProduceBuffer
from agents.permissions import Need
from agents.principals import ANYONE, Principal
from agents.security import Security, client_host
from broker.batch_checks import BatchChecks
from broker.cluster import ClusterView
from broker.config import BrokerConfig
from broker.waiting import ProducerWaits
from registry.verdicts import SchemaValidator
from storage.clock import Clock
from storage.metadata.base import MetadataStore
from storage.metadata.rows import TopicInfo

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
    # the ACLs for its principal. None: no authentication, every request allowed.
    security: Security | None = None
    principal: Principal | None = None
    # The client's address as Kafka's DescribeGroups shows a member's host ("/127.0.0.1"); set by the
    # connection, empty where the transport has no IP peer.
    client_host: str = ""
    # What frames read before authentication may hold at once, over every connection: not the produce
    # buffer, which clients that never log in could otherwise fill (each frame up to 512 KiB).
    unauthenticated: ProduceBuffer = field(
        default_factory=lambda: ProduceBuffer(max_bytes=UNAUTHENTICATED_BYTES)
    )
    # Shared by every connection of the listener: whether all its producers wait for acks.
    producer_waits: ProducerWaits = field(default_factory=ProducerWaits)
    # Shared by every connection of the listener: the threads that check compressed batches.
    batch_checks: BatchChecks = field(default_factory=BatchChecks)
    # Validation on produce (registry/verdicts.py), shared with the HTTP door; None: a topic that
    # validates schemas refuses every batch.
    schema_validator: SchemaValidator | None = None

    @property
    def who(self) -> Principal | None:
        """This connection's principal: ANYONE without authentication, None before it authenticates."""
        return ANYONE if self.security is None else self.principal

    def may(self, need: Need, name: str | None = None) -> bool:
        who = self.who
        if who is not None and who.superuser:  # as access.permits decides first: once per Produce request
            return True
        return access.permits(self.security, who, client_host(self.client_host), need, name)

    def require(self, need: Need, name: str | None = None) -> None:
        """The need's Forbidden (the resource's *_AUTHORIZATION_FAILED) unless ``may``."""
        if not self.may(need, name):
            raise access.refusal(need, self.who, name)

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
