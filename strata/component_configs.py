"""Settings turned into each component's own config: the Kafka listener's, the agent core's, the compaction
round's and the Spark compaction job's.

Components take plain config objects, never ``Settings``, so they can be built in tests without the process's
settings; this module is the one place that maps one onto the other.
"""

from __future__ import annotations

from agents.agent import AgentConfig
from agents.group_model import GroupLimits
from agents.transactions import TxnLimits
from broker.config import BrokerConfig
from pipeline.compaction import SparkCompactionConfig
from planner.config import RunnerConfig
from planner.planner import PlannerConfig
from planner.round import RoundConfig
from strata.settings import Settings


def broker_config(settings: Settings) -> BrokerConfig:
    return BrokerConfig(
        host=settings.host,
        port=settings.kafka_port,
        advertised_host=settings.kafka_advertised_host,
        advertised_port=settings.kafka_advertised_port,
        node_id=settings.kafka_node_id,
        lanes=settings.kafka_lanes,
        cluster=settings.kafka_cluster,
        cluster_timeout_ms=settings.kafka_cluster_timeout_ms,
        tls_cert_file=settings.tls_cert_file,
        tls_key_file=settings.tls_key_file,
        auto_create_topics=settings.auto_create_topics,
        num_partitions=settings.num_partitions,
        max_request_bytes=settings.kafka_max_request_bytes,
        max_connections=settings.kafka_max_connections,
        connections_max_idle_ms=settings.kafka_connections_max_idle_ms,
        request_receive_timeout_ms=settings.kafka_request_receive_timeout_ms,
        fetch_buffer_bytes=settings.kafka_fetch_buffer_bytes,
        frame_pool_bytes=settings.kafka_frame_pool_bytes,
    )


def agent_config(settings: Settings) -> AgentConfig:
    return AgentConfig(
        flush_interval_ms=settings.flush_interval_ms,
        flush_bytes=settings.flush_bytes,
        flush_idle_ms=settings.flush_idle_ms,
        flush_idle_bytes=settings.idle_flush_floor,
        low_latency_ms=settings.low_latency_bound_ms,
        default_flush_class=settings.default_flush_class,
        group_limits=GroupLimits(
            initial_delay_ms=settings.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=settings.group_min_session_timeout_ms,
            max_session_timeout_ms=settings.group_max_session_timeout_ms,
        ),
        buffer_bytes=settings.buffer_bytes,
        cache_bytes=settings.cache_bytes,
        idempotency_window_ms=settings.idempotency_window_ms,
        producer_id_expiration_ms=settings.producer_id_expiration_ms,
        txn_limits=TxnLimits(
            max_timeout_ms=settings.transaction_max_timeout_ms,
            id_expiration_ms=settings.transactional_id_expiration_ms,
        ),
    )


# Kafka's scheduler runs the first retention check this long after the broker starts.
RETENTION_INITIAL_DELAY_MS = 30_000


def round_config(settings: Settings, *, retention_now: bool = False) -> RoundConfig:
    """The compaction round's settings; ``retention_now``: retention in the first round (``strata
    compact``), instead of after Kafka's initial delay."""
    defaults = PlannerConfig()
    return RoundConfig(
        planner=PlannerConfig(
            merge_files=(settings.l0_merge_files, defaults.merge_files[1]),
            merge_bytes=defaults.merge_bytes,
            merge_age_ms=(settings.l0_merge_age_ms, defaults.merge_age_ms[1]),
        ),
        runner=RunnerConfig(
            map_bytes=settings.compaction_map_bytes,
            max_output_file_bytes=settings.compaction_file_bytes,
            lease_ms=settings.job_lease_ms,
            max_read_bytes_per_second=settings.compaction_max_read_bytes_per_second,
        ),
        obsolete_grace_ms=settings.gc_grace_ms,
        orphan_grace_ms=settings.orphan_grace_ms,
        retention_check_interval_ms=settings.retention_check_interval_ms,
        retention_initial_delay_ms=0
        if retention_now
        else min(RETENTION_INITIAL_DELAY_MS, settings.retention_check_interval_ms),
        offsets_retention_ms=settings.offsets_retention_minutes * 60_000,
    )


def spark_compaction_config(settings: Settings) -> SparkCompactionConfig:
    return SparkCompactionConfig(
        bucket_url=settings.bucket_url,
        metadata_url=settings.metadata_url,
        s3_endpoint=settings.s3_endpoint,
        s3_region=settings.s3_region,
        round=round_config(settings, retention_now=True),
    )
