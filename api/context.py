"""What the HTTP door's routes may use: the narrow context the process hands to ``create_app``.

The Kafka door's handlers take a ``BrokerContext``; this is its HTTP peer. Routes see the agent core, the
metadata roles they call, the clock, the metrics, the principals and a few facts about this process, never
the composition root (``strata/runtime.py``) itself, so what a route can reach is written here. The process
fills the callables (the Kafka listener's view, compaction planning) because those belong to other layers:
the HTTP door imports neither the Kafka door nor the planner.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from agents.agent import Agent
from agents.budget import ByteBudget
from agents.metrics import Metrics
from agents.metrics_history import MetricsHistory
from agents.security import Security
from registry.verdicts import SchemaValidator
from storage.clock import Clock
from storage.lake_status import LakeStatusReader
from storage.metadata.base import AdminStore, CompactionCatalog, StatsReader
from storage.metadata.coordination import GroupStore
from storage.metadata.lake_state import LakeStore
from storage.metadata.rows import Job
from storage.metadata.security import SecurityStore

if TYPE_CHECKING:
    from registry.service import SchemaRegistry


class HttpMetadata(
    AdminStore,
    GroupStore,
    StatsReader,
    CompactionCatalog,
    SecurityStore,
    LakeStore,
    LakeStatusReader,
    Protocol,
):
    """The metadata roles the routes call: topics and their admin, groups, the console's statistics, the
    compaction catalog (bytes by level, and the log start DeleteRecords moves), ACLs and users, and the
    lake's status rows (read, and a commit asked for)."""

    url: str


@dataclass(frozen=True, slots=True)
class KafkaListenerView:
    """The Kafka door as ``/v1/cluster`` shows it: this agent's node id and port, and the live agents as
    brokers when the listener runs in cluster mode (None otherwise)."""

    node_id: int
    port: int
    brokers: list[tuple[int, str, int]] | None


@dataclass(frozen=True, slots=True)
class ThisProcess:
    """Facts about this process that the cluster view shows. ``bucket_url`` has its password redacted."""

    node_id: int
    host: str
    http_port: int
    role: str
    bucket_url: str


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """Request bounds: the body size the middleware admits, how long its bytes may take to arrive, and the
    records one produce request may hold."""

    max_request_bytes: int
    max_records_per_request: int
    body_timeout_ms: int


@dataclass(frozen=True, slots=True)
class HttpContext:
    agent: Agent
    metadata: HttpMetadata
    clock: Clock
    metrics: Metrics
    history: MetricsHistory
    # Bytes of fetch answers held at once over every HTTP client (agents/budget.py).
    fetch_budget: ByteBudget
    limits: HttpLimits
    process: ThisProcess
    # Who may use the HTTP door and what they may do; None: no authentication, every request allowed.
    security: Security | None
    # The Kafka listener as it is now (its port is known only once it listens); None when there is none.
    kafka_listener: Callable[[], KafkaListenerView | None]
    # Plan compaction of one topic now (``force``: whatever its dirty ratio), then wake the process's
    # background loop if it runs one; returns the planned jobs.
    compact_now: Callable[[str], Awaitable[list[Job]]]
    # Wake the process's background loop, if it runs one, so that a lake commit asked for happens at once
    # rather than at the next interval (a worker process elsewhere finds the request at its next round).
    wake_worker: Callable[[], None] = lambda: None
    # Validation on produce (registry/verdicts.py), shared with the Kafka door; None: a topic that
    # validates schemas refuses every HTTP produce request.
    schema_validator: SchemaValidator | None = None
    # The schema registry's service, made on first use: typed produce, decoding fetch and the record
    # browser read schemas through it (api/typed_produce.py, api/typed_records.py). None: those requests
    # are refused, and the browser shows bytes only.
    schema_registry: Callable[[], SchemaRegistry] | None = None
