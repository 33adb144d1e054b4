"""The composition root: a Strata process assembled from settings (stores, metadata, metrics, agent, and
the compaction round on first use). Components can be injected."""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import os
import random
import socket
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from agents.agent import Agent
from agents.budget import ByteBudget
from agents.metrics import Metrics
from agents.metrics_history import MetricsHistory, RequestPrices
from agents.principals import Principals, load_principals
from agents.security import Security
from api.context import HttpContext, HttpLimits, KafkaListenerView, ThisProcess
from planner.metrics import CompactionMetrics
from planner.planner import Planner
from planner.round import CompactionRound
from registry.verdicts import LazyValidator, SchemaValidator
from storage.clock import Clock, SystemClock
from storage.errors import SettingsError, StrataError
from storage.lake_catalog import open_catalog
from storage.metadata import open_metadata_store
from storage.metadata.base import MetadataStore
from storage.metadata.lake_state import LakeUsageTotals
from storage.metadata.rows import Job
from storage.objectstore import open_async_object_store, open_object_store
from storage.objectstore.base import AsyncObjectStore, ObjectStore, RequestCounters
from strata.component_configs import agent_config, broker_config, round_config
from strata.settings import Settings, redact_password

if TYPE_CHECKING:
    from api.iceberg.context import IcebergContext
    from api.iceberg.lake import LakeCatalog
    from api.registry.context import RegistryContext
    from broker.server import KafkaServer
    from pipeline.lake.round import LakeRound
    from registry.service import SchemaRegistry
    from strata.registry_listener import RegistryListener

log = logging.getLogger("strata.server")


@dataclass
class Runtime:
    settings: Settings
    clock: Clock
    counters: RequestCounters
    store: ObjectStore
    astore: AsyncObjectStore
    metadata: MetadataStore
    metrics: Metrics
    agent: Agent
    # The agent's recent metrics, sampled while the process runs (the console's overview charts).
    history: MetricsHistory
    rng: random.Random = field(default_factory=random.Random)
    # Bytes of HTTP fetch answers held at once (the Kafka door's Fetch has its own, in BrokerContext).
    http_fetch_budget: ByteBudget = field(default_factory=lambda: ByteBudget(64 << 20))
    # Set to run a background round now (the admin endpoint), instead of at the next interval.
    worker_wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    _planner: Planner | None = None
    # Registered on the process's registry by its first compaction round: a process that runs none (an
    # agent, or role all's parent when its worker is a process: strata/worker_process.py) serves none.
    _compaction_metrics: CompactionMetrics | None = None
    _round: CompactionRound | None = None
    _lake_round: LakeRound | None = None
    # The Kafka listener, on the same agent core as HTTP; None when disabled (--kafka-port -1, role worker).
    kafka: KafkaServer | None = None
    # Principals, ACLs and stored SCRAM credentials (None in role worker, which has no door).
    security: Security | None = None
    # Whether the HTTP door authenticates (--principals-file or STRATA_API_TOKENS); the Kafka door does
    # with --principals-file only.
    http_authenticates: bool = False
    # The schema registry's own port, while it listens (strata/http.py starts it; None: --schema-registry-port
    # -1, or not started yet).
    registry_listener: RegistryListener | None = None
    _registry: SchemaRegistry | None = None
    # The lake's catalog as the Iceberg REST catalog reads it, made on first use (iceberg_context).
    _lake: LakeCatalog | None = None
    # Validation on produce, for both doors: one schema cache per process, its libraries loaded when a
    # topic first validates (registry/verdicts.py).
    schema_validator: SchemaValidator | None = None
    _sampler: asyncio.Task[None] | None = None
    _security_poll: asyncio.Task[None] | None = None

    def planner(self) -> Planner:
        """A planner (cheap: no offset map), for planning from any role, such as the admin endpoint."""
        if self._planner is None:
            self._planner = Planner(self.metadata, self.clock, round_config(self.settings).planner)
        return self._planner

    def compaction_round(self, retention_now: bool = False) -> CompactionRound:
        """The process's compaction round, created on first use (its job runner allocates the offset map).
        ``retention_now``: its first round applies retention (``strata compact``), rather than waiting the
        initial delay a long-running worker waits, as a Kafka broker does."""
        if self._round is None:
            self._compaction_metrics = CompactionMetrics(self.metrics.registry)
            self._round = CompactionRound(
                self.store,
                self.metadata,
                self.clock,
                # Key-hash secrets and output keys: never from a seedable generator (planner/offset_map.py).
                random.SystemRandom(),
                owner=f"{socket.gethostname()}:{os.getpid()}:{self.rng.getrandbits(32):08x}",
                config=round_config(self.settings, retention_now=retention_now),
                on_job=self._compaction_metrics.observe_job,
            )
        return self._round

    def lake_round(self) -> LakeRound:
        """The process's lake round (``pipeline/lake``), created on first use; its catalog (pyiceberg) is
        opened by its first round that has a table to write."""
        if self._lake_round is None:
            # Imported here: the lake brings pyarrow, which a process that never runs it does not need.
            from pipeline.lake.maintenance import MaintenanceConfig
            from pipeline.lake.metrics import LakeMetrics
            from pipeline.lake.round import LakeRound
            from pipeline.lake.runs import LakeWriterConfig

            settings = self.settings
            self._lake_round = LakeRound(
                self.metadata,
                self.store,
                partial(
                    open_catalog,
                    settings.metadata_url,
                    settings.bucket_url,
                    s3_endpoint=settings.s3_endpoint,
                    s3_region=settings.s3_region,
                ),
                self.clock,
                owner=f"{socket.gethostname()}:{os.getpid()}:{self.rng.getrandbits(32):08x}",
                config=LakeWriterConfig(
                    settings.lake_max_bytes_per_commit,
                    settings.job_lease_ms,
                    settings.lake_write_buffer_bytes,
                ),
                maintenance=MaintenanceConfig(
                    settings.lake_maintenance_interval_ms, settings.lake_orphan_grace_ms
                ),
                # strata_lake_* on the process's registry, scraped at /metrics with the agent's.
                observer=LakeMetrics(self.metrics.registry),
            )
        return self._lake_round

    def http_context(self) -> HttpContext:
        """What the HTTP door's routes may use of this process (api/context.py)."""
        settings = self.settings

        def kafka_listener() -> KafkaListenerView | None:
            if self.kafka is None:
                return None
            view = self.kafka.ctx.cluster
            return KafkaListenerView(
                self.kafka.ctx.config.node_id, self.kafka.port, view.brokers() if view is not None else None
            )

        async def compact_now(topic: str) -> list[Job]:
            jobs = await asyncio.to_thread(self.planner().plan, topic, True)
            self.worker_wakeup.set()
            return jobs

        return HttpContext(
            agent=self.agent,
            metadata=self.metadata,
            clock=self.clock,
            metrics=self.metrics,
            history=self.history,
            fetch_budget=self.http_fetch_budget,
            limits=HttpLimits(
                settings.max_request_bytes, settings.max_records_per_request, settings.http_body_timeout_ms
            ),
            process=ThisProcess(
                node_id=settings.kafka_node_id,
                host=settings.host,
                http_port=settings.port,
                role=settings.role,
                bucket_url=redact_password(settings.bucket_url),
            ),
            security=self.security if self.http_authenticates else None,
            kafka_listener=kafka_listener,
            compact_now=compact_now,
            wake_worker=self.worker_wakeup.set,
            schema_validator=self.schema_validator,
            schema_registry=self.schema_registry,
        )

    def schema_registry(self) -> SchemaRegistry:
        """The schema registry's service over the metadata store, made on first use: a worker, which serves
        no registry, never loads the schema formats' libraries."""
        if self._registry is None:
            from registry.service import SchemaRegistry, default_formats

            self._registry = SchemaRegistry(self.metadata, default_formats())
        return self._registry

    def registry_context(self) -> RegistryContext:
        """What the schema registry's routes may use of this process (api/registry/context.py)."""
        from api.registry.context import RegistryContext

        settings = self.settings
        return RegistryContext(
            registry=self.schema_registry(),
            security=self.security if self.http_authenticates else None,
            max_body_bytes=settings.max_request_bytes,
            body_timeout_s=settings.http_body_timeout_ms / 1000,
            cluster_id=broker_config(settings).cluster_id,
            version=_version(),
        )

    def iceberg_context(self) -> IcebergContext:
        """What the Iceberg catalog's routes may use of this process (api/iceberg/context.py): the lake's
        catalog on this process's metadata database and bucket, whose database connections open on its
        first request and close with the runtime."""
        from api.iceberg.context import IcebergContext
        from api.iceberg.lake import LakeCatalog

        settings = self.settings
        if self._lake is None:
            self._lake = LakeCatalog(
                settings.metadata_url,
                settings.bucket_url,
                s3_endpoint=settings.s3_endpoint,
                s3_region=settings.s3_region,
            )
        return IcebergContext(lake=self._lake, security=self.security if self.http_authenticates else None)

    async def start(self) -> None:
        await self.astore.open()
        await self.agent.start()
        if self.kafka is not None:
            await self.kafka.start()
        self._sampler = asyncio.create_task(self._sample_forever(self.history))
        if self.security is not None:
            self._security_poll = asyncio.create_task(self.security.keep_fresh(self.clock))

    async def _sample_forever(self, history: MetricsHistory) -> None:
        while True:
            history.sample(self.clock.now_ms(), await self._lake_totals())
            await self.clock.asleep(history.interval_ms / 1000)

    async def _lake_totals(self) -> LakeUsageTotals | None:
        """The lake's cluster-wide totals for the history, read off the event loop; None when the metadata
        store does not answer (the point then shows no lake figures)."""
        try:
            return await asyncio.to_thread(self.metadata.lake_usage_totals)
        except StrataError as exc:
            log.debug("the lake's totals were not read for the metrics history: %s", exc.message)
            return None

    async def close(self) -> None:
        for task in (self._sampler, self._security_poll):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self.kafka is not None:
            await self.kafka.close()  # no new Kafka requests; then the agent flushes what it holds
        await self.agent.close()
        await self.astore.close()
        if self._lake_round is not None:
            self._lake_round.close()
        self.store.close()
        if self._lake is not None:
            self._lake.close()
        self.metadata.close()


def _version() -> str:
    try:
        return importlib.metadata.version("strata")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def build_runtime(
    settings: Settings,
    *,
    clock: Clock | None = None,
    rng: random.Random | None = None,
    store: ObjectStore | None = None,
    astore: AsyncObjectStore | None = None,
    metadata: MetadataStore | None = None,
) -> Runtime:
    """Open everything the settings name, except components passed in (tests inject fault wrappers)."""
    clock = clock or SystemClock()
    rng = rng or random.Random()
    counters, store, astore = _object_stores(settings, clock, rng, store, astore)
    if metadata is None:
        metadata = open_metadata_store(settings.metadata_url)
    registry = CollectorRegistry()  # the process's one registry, shared by the agent and the worker's rounds
    metrics = Metrics(counters, registry)
    agent = Agent(agent_config(settings), astore, metadata, metrics, clock, rng)
    if settings.tls_cert_file or settings.tls_key_file:
        # Both doors use these files: a missing or unreadable one stops start-up with their names, before
        # any listener opens (uvicorn's own error would not say which file).
        broker_config(settings).ssl_context()
    check_no_open_door(settings)
    security = _security(settings, metadata)
    kafka_security = security if settings.principals_file else None
    schema_validator = LazyValidator(partial(_schema_validator, metadata, clock, metrics))
    kafka = _kafka_listener(settings, agent, metadata, clock, kafka_security, schema_validator)
    return Runtime(
        settings,
        clock,
        counters,
        store,
        astore,
        metadata,
        metrics,
        agent,
        MetricsHistory(
            metrics,
            counters,
            RequestPrices(
                settings.s3_put_price_per_1000,
                settings.s3_get_price_per_1000,
                settings.s3_storage_price_per_gb_month,
            ),
            interval_ms=settings.metrics_sample_ms,
        ),
        rng,
        kafka=kafka,
        schema_validator=schema_validator,
        security=security,
        http_authenticates=bool(settings.principals_file or settings.tokens),
        http_fetch_budget=ByteBudget(settings.http_fetch_buffer_bytes),
    )


def check_no_open_door(settings: Settings) -> None:
    """SettingsError if HTTP authenticates (STRATA_API_TOKENS) while the Kafka listener would serve anyone
    (no principals file), unless the operator says so (--allow-open-kafka): a door left open by mistake
    would make HTTP's authentication pointless."""
    kafka = settings.kafka_port >= 0 and settings.role != "worker"
    if settings.tokens and not settings.principals_file and kafka and not settings.allow_open_kafka:
        raise SettingsError(
            "STRATA_API_TOKENS makes HTTP authenticate, but without --principals-file the Kafka listener "
            f"on port {settings.kafka_port} would serve anyone: set --principals-file to authenticate Kafka "
            "clients too, --kafka-port -1 to run without a Kafka listener, or --allow-open-kafka "
            "(STRATA_ALLOW_OPEN_KAFKA=true) to run it open on purpose"
        )


def _security(settings: Settings, metadata: MetadataStore) -> Security | None:
    """The principals file and STRATA_API_TOKENS' principal, with the stored ACLs and credentials loaded
    and the file's grants seeded (None in role worker, which serves no door)."""
    if settings.role == "worker":
        return None
    principals = load_principals(settings.principals_file) if settings.principals_file else Principals([])
    security = Security(
        principals.with_tokens(settings.tokens), metadata, refresh_ms=settings.security_refresh_ms
    )
    seeded = security.seed()
    if seeded:
        log.info("seeded %d ACLs from the principals file", seeded)
    security.refresh()
    return security


def _object_stores(
    settings: Settings,
    clock: Clock,
    rng: random.Random,
    store: ObjectStore | None,
    astore: AsyncObjectStore | None,
) -> tuple[RequestCounters, ObjectStore, AsyncObjectStore]:
    """The sync and async stores on the bucket, sharing one set of request counters (an injected store's,
    if any, so a test's fault wrapper counts every request)."""
    injected = astore or store
    counters = injected.counters if injected is not None else RequestCounters()
    url, endpoint, region = settings.bucket_url, settings.s3_endpoint, settings.s3_region
    if store is None:
        store = open_object_store(
            url, endpoint_url=endpoint, region=region, counters=counters, clock=clock, rng=rng
        )
    if astore is None:
        astore = open_async_object_store(
            url, endpoint_url=endpoint, region=region, counters=counters, clock=clock, rng=rng
        )
    return counters, store, astore


def _schema_validator(metadata: MetadataStore, clock: Clock, metrics: Metrics) -> SchemaValidator:
    """Validation on produce's validator over the metadata store, imported here: only when a topic
    validates schemas does the process load the schema formats' libraries."""
    from registry.validate import store_validator

    return store_validator(metadata, clock.monotonic, metrics)


def _kafka_listener(
    settings: Settings,
    agent: Agent,
    metadata: MetadataStore,
    clock: Clock,
    security: Security | None,
    schema_validator: SchemaValidator,
) -> KafkaServer | None:
    """The Kafka door on the agent core, or None (--kafka-port -1, role worker)."""
    if settings.kafka_port < 0 or settings.role == "worker":
        return None
    # Imported only for a listener: the Kafka door's protocol library (kafka-python, whose package imports
    # its whole client) is a large share of an agent's memory, which an HTTP-only agent does without.
    from broker.context import BrokerContext
    from broker.server import KafkaServer

    config = broker_config(settings)
    return KafkaServer(
        BrokerContext(
            agent,
            metadata,
            config,
            clock,
            ByteBudget(config.fetch_buffer_bytes),
            security=security,
            schema_validator=schema_validator,
        )
    )
