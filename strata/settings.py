"""Server settings: ``Settings`` and how it is loaded, from the table of every setting's flag, STRATA_*
environment variable, type and default (``strata/setting_table.py``).

Precedence: command-line flag > environment variable > default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from planner.throttle import check_rate
from storage.errors import SettingsError
from storage.topic_config import LOW_LATENCY, STANDARD
from strata.setting_table import ROLES as ROLES
from strata.setting_table import SETTINGS as SETTINGS
from strata.setting_table import SETTINGS_BY_ENV as SETTINGS_BY_ENV
from strata.setting_table import MiB as MiB
from strata.setting_table import Setting as Setting
from strata.setting_table import parse_bool as parse_bool

# The idle cut's floor on an object store that charges per request (see Settings.idle_flush_floor).
S3_IDLE_FLUSH_FLOOR = 3 * MiB
# The low-latency class's bound (agents/flush_policy.py): on a local directory a flush is a file write and a
# commit, so it is cut at the flush loop's next turn, which comes after the requests read in the same turn
# of the event loop (they share it); a 1 ms bound cost a lone record about 3 ms more (a timer, rounded up
# to the event loop's millisecond clock) and nothing under load. On S3 about one small PUT's time, since a
# flush cut sooner would only wait behind the uploads in flight.
LOCAL_LOW_LATENCY_MS = 0
S3_LOW_LATENCY_MS = 20


@dataclass(frozen=True, slots=True)
class Settings:
    data_dir: str = "./data"
    host: str = "127.0.0.1"
    port: int = 8080
    bucket: str | None = None
    s3_endpoint: str | None = None
    s3_region: str | None = None
    metadata: str | None = None
    flush_interval_ms: int = 250
    flush_bytes: int = 8 * MiB
    flush_idle_ms: int = 5
    flush_idle_bytes: int | None = None
    flush_class: str | None = None
    low_latency_ms: int | None = None
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    buffer_bytes: int = 64 * MiB
    cache_bytes: int = 64 * MiB
    max_request_bytes: int = 16 * MiB
    max_records_per_request: int = 10_000
    idempotency_window_ms: int = 3_600_000
    producer_id_expiration_ms: int = 86_400_000
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    role: str = "all"
    api_tokens: str | None = None
    principals_file: str | None = None
    allow_open_kafka: bool = False
    security_refresh_ms: int = 1000
    orphan_grace_ms: int = 3_600_000
    gc_grace_ms: int = 600_000
    worker_process: bool = True
    worker_interval_ms: int = 5_000
    retention_check_interval_ms: int = 300_000
    offsets_retention_minutes: int = 10_080
    compaction_map_bytes: int = 128 * MiB
    # A quarter of cache_bytes' default: agents read files up to that whole, once for every partition.
    compaction_file_bytes: int = 16 * MiB
    compaction_max_read_bytes_per_second: int = 0
    job_lease_ms: int = 60_000
    lake: bool = True
    lake_max_bytes_per_commit: int = 256 * MiB
    lake_write_buffer_bytes: int = 64 * MiB
    lake_maintenance_interval_ms: int = 3_600_000
    lake_orphan_grace_ms: int = 86_400_000
    l0_merge_files: int = 8
    l0_merge_age_ms: int = 20_000
    kafka_port: int = 9092
    schema_registry_port: int = 8081
    kafka_advertised_host: str | None = None
    kafka_advertised_port: int | None = None
    kafka_node_id: int = 0
    kafka_lanes: int = 1
    kafka_cluster: bool = False
    kafka_cluster_timeout_ms: int = 9000
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    auto_create_topics: bool = True
    num_partitions: int = 1
    kafka_max_connections: int = 1000
    kafka_connections_max_idle_ms: int = 600_000
    kafka_request_receive_timeout_ms: int = 30_000
    http_body_timeout_ms: int = 30_000
    kafka_fetch_buffer_bytes: int = 64 * MiB
    kafka_frame_pool_bytes: int = 8 * MiB
    http_fetch_buffer_bytes: int = 64 * MiB
    kafka_max_request_bytes: int = 100 * MiB
    metrics_sample_ms: int = 5_000
    s3_put_price_per_1000: float = 0.005
    s3_get_price_per_1000: float = 0.0004
    s3_storage_price_per_gb_month: float = 0.023
    log_level: str = "info"
    access_log: bool = False

    @property
    def bucket_url(self) -> str:
        if self.bucket:
            return self.bucket
        return "file://" + str((Path(self.data_dir) / "bucket").resolve())

    @property
    def idle_flush_floor(self) -> int:
        """``flush_idle_bytes``, or its default for the bucket: on a local directory a flush costs a file
        write and no request, so the idle cut needs no floor and one waiting producer is answered within
        milliseconds; on S3 every flush is a PUT, and the floor keeps a trickle to one PUT per interval."""
        if self.flush_idle_bytes is not None:
            return self.flush_idle_bytes
        return 0 if self.local_bucket else S3_IDLE_FLUSH_FLOOR

    @property
    def local_bucket(self) -> bool:
        return self.bucket_url.startswith("file://")

    @property
    def default_flush_class(self) -> str:
        """``flush_class``, or its default for the bucket: low-latency on a local directory, where a flush
        costs no request and ``make run`` answers a producer within milliseconds; standard on S3, where
        every flush is a PUT."""
        if self.flush_class is not None:
            return self.flush_class
        return LOW_LATENCY if self.local_bucket else STANDARD

    @property
    def low_latency_bound_ms(self) -> int:
        """``low_latency_ms``, or its default for the bucket."""
        if self.low_latency_ms is not None:
            return self.low_latency_ms
        return LOCAL_LOW_LATENCY_MS if self.local_bucket else S3_LOW_LATENCY_MS

    @property
    def metadata_url(self) -> str:
        if self.metadata:
            return self.metadata
        return "sqlite:///" + str((Path(self.data_dir) / "metadata.db").resolve())

    @property
    def tokens(self) -> frozenset[str]:
        if not self.api_tokens:
            return frozenset()
        return frozenset(t.strip() for t in self.api_tokens.split(",") if t.strip())


def load_settings(
    overrides: Mapping[str, object] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Defaults, then STRATA_* variables, then explicit overrides (command-line flags that were given)."""
    env = os.environ if environ is None else environ
    values: dict[str, object] = {}
    for setting in SETTINGS:
        raw = env.get(setting.env)
        if raw is not None and raw != "":
            try:
                values[setting.name] = setting.type(raw)
            except ValueError as exc:
                raise SettingsError(f"{setting.env}={raw!r}: {exc}") from None
    for name, value in (overrides or {}).items():
        if value is not None:
            values[name] = value
    for setting in SETTINGS:
        value = values.get(setting.name)
        if setting.choices and value is not None and value not in setting.choices:
            raise SettingsError(f"{setting.env}: {value!r} is not one of {', '.join(setting.choices)}")
    known = {f.name for f in fields(Settings)}
    settings = Settings(**{k: v for k, v in values.items() if k in known})  # type: ignore[arg-type]
    if settings.transaction_max_timeout_ms < 1 or settings.transactional_id_expiration_ms < 1:
        raise SettingsError(
            "STRATA_TRANSACTION_MAX_TIMEOUT_MS and STRATA_TRANSACTIONAL_ID_EXPIRATION_MS: >= 1"
        )
    if settings.metrics_sample_ms < 100 or settings.security_refresh_ms < 10:
        raise SettingsError("STRATA_METRICS_SAMPLE_MS >= 100 and STRATA_SECURITY_REFRESH_MS >= 10")
    try:
        check_rate(settings.compaction_max_read_bytes_per_second)
    except SettingsError as exc:
        raise SettingsError(f"STRATA_COMPACTION_MAX_READ_BYTES_PER_SECOND: {exc.message}") from None
    if settings.lake_max_bytes_per_commit < 1:
        raise SettingsError("STRATA_LAKE_MAX_BYTES_PER_COMMIT: at least 1")
    if settings.lake_write_buffer_bytes < MiB:
        raise SettingsError("STRATA_LAKE_WRITE_BUFFER_BYTES: at least 1 MiB")
    if settings.lake_maintenance_interval_ms < 0:
        raise SettingsError("STRATA_LAKE_MAINTENANCE_INTERVAL_MS: not negative")
    # The grace must outlast any lake writer's upload-to-commit time, or its files would be taken for
    # orphans: well past the writer's lease.
    if settings.lake_orphan_grace_ms < max(600_000, 10 * settings.job_lease_ms):
        raise SettingsError(
            "STRATA_LAKE_ORPHAN_GRACE_MS: at least 600000 and 10 times STRATA_JOB_LEASE_MS (a lake writer's"
            " uploads must outlive its commit)"
        )
    prices = (
        settings.s3_put_price_per_1000,
        settings.s3_get_price_per_1000,
        settings.s3_storage_price_per_gb_month,
    )
    if min(prices) < 0:
        raise SettingsError(
            "STRATA_S3_PUT_PRICE_PER_1000 / STRATA_S3_GET_PRICE_PER_1000 /"
            " STRATA_S3_STORAGE_PRICE_PER_GB_MONTH: not negative"
        )
    return settings


def redact_password(url: str) -> str:
    """The URL with any password replaced by ***, for logs."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
