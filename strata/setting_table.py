"""The table of every setting: its flag, STRATA_* environment variable, type, default and help.

``strata/settings.py`` builds ``Settings`` from it (flag > environment variable > default); the docs and the
docker-compose check read it, so a variable that is not here is not a setting.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

MiB = 1024 * 1024
ROLES = ("agent", "worker", "all")


@dataclass(frozen=True, slots=True)
class Setting:
    name: str  # attribute of Settings; the flag is --name-with-dashes
    env: str
    type: Callable[[str], object]
    default: object
    help: str
    choices: tuple[str, ...] | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def parse_bool(raw: str) -> bool:
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {raw!r}")


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "data_dir", "STRATA_DATA_DIR", str, "./data", "Directory for the embedded bucket and SQLite file"
    ),
    Setting("host", "STRATA_HOST", str, "127.0.0.1", "Address the HTTP server binds to"),
    Setting("port", "STRATA_PORT", int, 8080, "Port the HTTP server listens on"),
    Setting(
        "bucket",
        "STRATA_BUCKET",
        str,
        None,
        "Object store URL: file:///path or s3://bucket[/prefix] (default: file://DATA_DIR/bucket)",
    ),
    Setting("s3_endpoint", "STRATA_S3_ENDPOINT", str, None, "S3 endpoint override (MinIO, moto)"),
    Setting("s3_region", "STRATA_S3_REGION", str, None, "S3 region (default: the AWS SDK's)"),
    Setting(
        "metadata",
        "STRATA_METADATA",
        str,
        None,
        "Metadata URL: sqlite:///path or postgresql://... (default: sqlite:///DATA_DIR/metadata.db)",
    ),
    Setting(
        "flush_interval_ms", "STRATA_FLUSH_INTERVAL_MS", int, 250, "Flush at most this long after a record"
    ),
    Setting(
        "flush_bytes", "STRATA_FLUSH_BYTES", int, 8 * MiB, "Flush as soon as this many bytes are buffered"
    ),
    Setting(
        "flush_idle_ms",
        "STRATA_FLUSH_IDLE_MS",
        int,
        5,
        "Also flush once FLUSH_IDLE_BYTES are buffered and no request came for this long (0: off)",
    ),
    Setting(
        "flush_idle_bytes",
        "STRATA_FLUSH_IDLE_BYTES",
        int,
        None,
        "The least buffered bytes that the idle flush cuts (default: 0 on a local directory, where a flush"
        " costs no request; 3 MiB on S3, where it costs a PUT)",
    ),
    Setting(
        "flush_class",
        "STRATA_FLUSH_CLASS",
        str,
        None,
        "The flush class of topics that set no strata.flush.class: standard or low-latency (default:"
        " low-latency on a local directory, standard on S3)",
        choices=("standard", "low-latency"),
    ),
    Setting(
        "low_latency_ms",
        "STRATA_LOW_LATENCY_MS",
        int,
        None,
        "The longest a low-latency topic's record waits for its flush to be cut (default: 0 on a local"
        " directory, 20 on S3)",
    ),
    Setting(
        "group_initial_rebalance_delay_ms",
        "STRATA_GROUP_INITIAL_REBALANCE_DELAY_MS",
        int,
        3000,
        "Kafka's group.initial.rebalance.delay.ms: an empty group waits this long for more members",
    ),
    Setting(
        "group_min_session_timeout_ms",
        "STRATA_GROUP_MIN_SESSION_TIMEOUT_MS",
        int,
        6000,
        "Kafka's group.min.session.timeout.ms",
    ),
    Setting(
        "group_max_session_timeout_ms",
        "STRATA_GROUP_MAX_SESSION_TIMEOUT_MS",
        int,
        1_800_000,
        "Kafka's group.max.session.timeout.ms",
    ),
    Setting("buffer_bytes", "STRATA_BUFFER_BYTES", int, 64 * MiB, "Produce buffer bound; past it: HTTP 429"),
    Setting("cache_bytes", "STRATA_CACHE_BYTES", int, 64 * MiB, "Fetch cache size (recent files and ranges)"),
    Setting(
        "max_request_bytes",
        "STRATA_MAX_REQUEST_BYTES",
        int,
        16 * MiB,
        "Largest produce request body accepted",
    ),
    Setting(
        "max_records_per_request",
        "STRATA_MAX_RECORDS_PER_REQUEST",
        int,
        10_000,
        "Most records accepted in one produce request",
    ),
    Setting(
        "idempotency_window_ms",
        "STRATA_IDEMPOTENCY_WINDOW_MS",
        int,
        3_600_000,
        "How long an Idempotency-Key is remembered",
    ),
    Setting(
        "producer_id_expiration_ms",
        "STRATA_PRODUCER_ID_EXPIRATION_MS",
        int,
        86_400_000,
        "Kafka's producer.id.expiration.ms: how long an idempotent producer's state outlives its last write",
    ),
    Setting(
        "transaction_max_timeout_ms",
        "STRATA_TRANSACTION_MAX_TIMEOUT_MS",
        int,
        900_000,
        "Kafka's transaction.max.timeout.ms: the longest transaction.timeout.ms a producer may ask for",
    ),
    Setting(
        "transactional_id_expiration_ms",
        "STRATA_TRANSACTIONAL_ID_EXPIRATION_MS",
        int,
        604_800_000,
        "Kafka's transactional.id.expiration.ms: how long an idle transactional id is remembered",
    ),
    Setting("role", "STRATA_ROLE", str, "all", "agent (HTTP), worker (background jobs) or all", ROLES),
    Setting("api_tokens", "STRATA_API_TOKENS", str, None, "Comma-separated bearer tokens; unset = no auth"),
    Setting(
        "principals_file",
        "STRATA_PRINCIPALS_FILE",
        str,
        None,
        "TOML file of principals (docs/operations.md): their passwords for Kafka SASL (PLAIN, "
        "SCRAM-SHA-256/512) and HTTP Basic, their bearer tokens, and their grants on topic and group "
        "prefixes (seeded as ACLs); set, both front doors authenticate every request and check its ACLs",
    ),
    Setting(
        "allow_open_kafka",
        "STRATA_ALLOW_OPEN_KAFKA",
        parse_bool,
        False,
        "Start although HTTP authenticates (API tokens) and the Kafka listener does not (no principals file)",
    ),
    Setting(
        "security_refresh_ms",
        "STRATA_SECURITY_REFRESH_MS",
        int,
        1000,
        "How often an agent checks the metadata store for changed ACLs and SCRAM credentials",
    ),
    Setting(
        "orphan_grace_ms",
        "STRATA_ORPHAN_GRACE_MS",
        int,
        3_600_000,
        "Age after which an uploaded but uncommitted object is deleted",
    ),
    Setting(
        "gc_grace_ms",
        "STRATA_GC_GRACE_MS",
        int,
        600_000,
        "Age after which an obsolete file (no live chunk) is deleted; longer than any read",
    ),
    Setting(
        "worker_process",
        "STRATA_WORKER_PROCESS",
        parse_bool,
        True,
        "In role all, run the background worker (retention, compaction, GC, the lake) in a child process of "
        "its own, so that its rounds never hold the agent's interpreter lock; false: in a thread of the "
        "agent's process",
    ),
    Setting(
        "worker_interval_ms",
        "STRATA_WORKER_INTERVAL_MS",
        int,
        5_000,
        "Pause between background rounds (retention, planning, compaction, GC)",
    ),
    Setting(
        "retention_check_interval_ms",
        "STRATA_RETENTION_CHECK_INTERVAL_MS",
        int,
        300_000,
        "How often a worker applies retention.ms and retention.bytes, the first time 30 s after it starts "
        "(Kafka's log.retention.check.interval.ms)",
    ),
    Setting(
        "offsets_retention_minutes",
        "STRATA_OFFSETS_RETENTION_MINUTES",
        int,
        10_080,
        "Committed offsets of a consumer group that has been empty this long are deleted, with the group; "
        "offsets committed without a group expire this long after their commit (Kafka's "
        "offsets.retention.minutes)",
    ),
    Setting(
        "compaction_map_bytes",
        "STRATA_COMPACTION_MAP_BYTES",
        int,
        128 * MiB,
        "Memory of the compaction offset map (24 bytes per key)",
    ),
    Setting(
        "compaction_file_bytes",
        "STRATA_COMPACTION_FILE_BYTES",
        int,
        16 * MiB,
        "Largest compaction output file; only a chunk larger by itself exceeds it",
    ),
    Setting(
        "compaction_max_read_bytes_per_second",
        "STRATA_COMPACTION_MAX_READ_BYTES_PER_SECOND",
        int,
        0,
        "Bytes per second a worker's compaction may read (Kafka's log.cleaner.io.max.bytes.per.second); "
        "0: no limit, else at least 1 MiB/s",
    ),
    Setting(
        "job_lease_ms", "STRATA_JOB_LEASE_MS", int, 60_000, "Lease of a compaction job; renewed while it runs"
    ),
    Setting(
        "lake",
        "STRATA_LAKE",
        parse_bool,
        True,
        "Run the lake writer in the worker's rounds: topics with strata.iceberg.mode set are kept as Iceberg"
        " tables (docs/lake.md)",
    ),
    Setting(
        "lake_max_bytes_per_commit",
        "STRATA_LAKE_MAX_BYTES_PER_COMMIT",
        int,
        256 * MiB,
        "Chunk bytes one lake commit reads at most (a table catching up takes several commits, back to back)",
    ),
    Setting(
        "lake_write_buffer_bytes",
        "STRATA_LAKE_WRITE_BUFFER_BYTES",
        int,
        64 * MiB,
        "Decoded bytes the lake writer holds at once: a commit goes in pieces of this size, each written"
        " as its own data file(s), so the writer's memory is bounded by it (docs/lake.md), not by the"
        " commit's size",
    ),
    Setting(
        "lake_maintenance_interval_ms",
        "STRATA_LAKE_MAINTENANCE_INTERVAL_MS",
        int,
        3_600_000,
        "How often a worker maintains each lake table: small-file rewrite, snapshot expiry, orphan cleanup",
    ),
    Setting(
        "lake_orphan_grace_ms",
        "STRATA_LAKE_ORPHAN_GRACE_MS",
        int,
        86_400_000,
        "Age at which a lake file no snapshot names is deleted (at least 10 min and 10 job leases)",
    ),
    Setting("l0_merge_files", "STRATA_L0_MERGE_FILES", int, 8, "Merge L0 files into L1 when this many exist"),
    Setting(
        "l0_merge_age_ms",
        "STRATA_L0_MERGE_AGE_MS",
        int,
        20_000,
        "...or when the oldest L0 file is this old",
    ),
    Setting(
        "kafka_port",
        "STRATA_KAFKA_PORT",
        int,
        9092,
        "Port of the Kafka listener (roles agent and all); -1 disables it",
    ),
    Setting(
        "schema_registry_port",
        "STRATA_SCHEMA_REGISTRY_PORT",
        int,
        8081,
        "Port of the schema registry's own listener, Confluent's API at its root (roles agent and all; the "
        "HTTP port serves it under /schema-registry too); -1 disables it",
    ),
    Setting(
        "kafka_advertised_host",
        "STRATA_KAFKA_ADVERTISED_HOST",
        str,
        None,
        "Host Kafka clients are told to connect to (default: --host)",
    ),
    Setting(
        "kafka_advertised_port",
        "STRATA_KAFKA_ADVERTISED_PORT",
        int,
        None,
        "Port Kafka clients are told to connect to (default: --kafka-port), e.g. behind port mapping",
    ),
    Setting(
        "kafka_node_id",
        "STRATA_KAFKA_NODE_ID",
        int,
        0,
        "Broker id shown to Kafka clients; agents behind one load-balanced address share it",
    ),
    Setting(
        "kafka_lanes",
        "STRATA_KAFKA_LANES",
        int,
        1,
        "Broker ids this agent shows Kafka clients: lane i is id node id + i on port kafka port + i, "
        "with partition leadership spread over the lanes: a client opens a connection per id, and an "
        "idempotent producer may have only 5 requests in flight per connection",
    ),
    Setting(
        "tls_cert_file",
        "STRATA_TLS_CERT_FILE",
        str,
        None,
        "PEM certificate (chain) for TLS on the HTTP and Kafka listeners; with STRATA_TLS_KEY_FILE",
    ),
    Setting("tls_key_file", "STRATA_TLS_KEY_FILE", str, None, "PEM private key of STRATA_TLS_CERT_FILE"),
    Setting(
        "kafka_cluster",
        "STRATA_KAFKA_CLUSTER",
        parse_bool,
        False,
        "Show the live agents sharing the metadata store as Kafka brokers (each at its advertised address), "
        "instead of this agent as the only broker",
    ),
    Setting(
        "kafka_cluster_timeout_ms",
        "STRATA_KAFKA_CLUSTER_TIMEOUT_MS",
        int,
        9000,
        "With --kafka-cluster: an agent leaves the brokers this long after its last heartbeat (Kafka's "
        "broker.session.timeout.ms); at least three heartbeats (3000)",
    ),
    Setting(
        "auto_create_topics",
        "STRATA_AUTO_CREATE_TOPICS",
        parse_bool,
        True,
        "Kafka's auto.create.topics.enable: a Metadata request naming an unknown topic creates it",
    ),
    Setting(
        "num_partitions",
        "STRATA_NUM_PARTITIONS",
        int,
        1,
        "Kafka's num.partitions: partitions of auto-created topics and of CreateTopics without a count",
    ),
    Setting(
        "kafka_max_connections",
        "STRATA_KAFKA_MAX_CONNECTIONS",
        int,
        1000,
        "Kafka connections open at once; more are refused",
    ),
    Setting(
        "kafka_connections_max_idle_ms",
        "STRATA_KAFKA_CONNECTIONS_MAX_IDLE_MS",
        int,
        600_000,
        "A Kafka connection that sends nothing and waits for no answer this long is closed (Kafka's "
        "connections.max.idle.ms)",
    ),
    Setting(
        "kafka_request_receive_timeout_ms",
        "STRATA_KAFKA_REQUEST_RECEIVE_TIMEOUT_MS",
        int,
        30_000,
        "A Kafka request whose bytes stop arriving closes its connection this long after its first byte, "
        "and the memory it reserved goes back",
    ),
    Setting(
        "http_body_timeout_ms",
        "STRATA_HTTP_BODY_TIMEOUT_MS",
        int,
        30_000,
        "An HTTP request body not received in full this long after its first byte is refused (408)",
    ),
    Setting(
        "kafka_fetch_buffer_bytes",
        "STRATA_KAFKA_FETCH_BUFFER_BYTES",
        int,
        64 * MiB,
        "bytes of Kafka Fetch answers held at once over all connections; a Fetch waits for room and reads no "
        "more than it was granted",
    ),
    Setting(
        "kafka_frame_pool_bytes",
        "STRATA_KAFKA_FRAME_POOL_BYTES",
        int,
        8 * MiB,
        "bytes of large Kafka request buffers kept to be used again (outside the produce buffer); "
        "0 keeps none",
    ),
    Setting(
        "http_fetch_buffer_bytes",
        "STRATA_HTTP_FETCH_BUFFER_BYTES",
        int,
        64 * MiB,
        "Bytes of HTTP fetch answers held at once over every client (each fetch holds twice its max_bytes "
        "until its answer is sent); a fetch that cannot get its share in time is told to retry (429)",
    ),
    Setting(
        "kafka_max_request_bytes",
        "STRATA_KAFKA_MAX_REQUEST_BYTES",
        int,
        100 * MiB,
        "Kafka's socket.request.max.bytes: a larger request frame closes its connection",
    ),
    Setting(
        "metrics_sample_ms",
        "STRATA_METRICS_SAMPLE_MS",
        int,
        5_000,
        "How often the agent samples its own metrics for the console's charts (15 minutes are kept at 5 s)",
    ),
    Setting(
        "s3_put_price_per_1000",
        "STRATA_S3_PUT_PRICE_PER_1000",
        float,
        0.005,
        "USD per 1,000 PUT/LIST requests, for the console's cost estimate (S3 Standard list price)",
    ),
    Setting(
        "s3_get_price_per_1000",
        "STRATA_S3_GET_PRICE_PER_1000",
        float,
        0.0004,
        "USD per 1,000 GET requests, for the console's cost estimate (S3 Standard list price)",
    ),
    Setting(
        "s3_storage_price_per_gb_month",
        "STRATA_S3_STORAGE_PRICE_PER_GB_MONTH",
        float,
        0.023,
        "USD per GiB-month stored, for the console's cost of the lake's tables (S3 Standard list price)",
    ),
    Setting("log_level", "STRATA_LOG_LEVEL", str, "info", "Log level", ("debug", "info", "warning", "error")),
    Setting("access_log", "STRATA_ACCESS_LOG", parse_bool, False, "Log every HTTP request"),
)
SETTINGS_BY_ENV = {s.env: s for s in SETTINGS}
