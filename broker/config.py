"""The Kafka listener's settings, as the composition root (api/) builds them from ``STRATA_*`` settings."""

from __future__ import annotations

import ssl
import zlib
from dataclasses import dataclass

from storage.errors import SettingsError

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    host: str = "127.0.0.1"
    port: int = 9092
    # What Metadata tells clients to connect to: the bind host by default. Several agents behind one
    # load-balanced address share one advertised address and one node id.
    advertised_host: str | None = None
    advertised_port: int | None = None
    node_id: int = 0
    # Broker ids shown for this one agent: node_id .. node_id + lanes - 1, lane i listening on port + i
    # (advertised at advertised_port + i), with partition leadership spread over them. Kafka clients open
    # one connection per broker id, and an idempotent producer keeps at most 5 requests in flight per
    # connection. With acks only after a flush commit (up to 250 ms), one connection then carries at most
    # 5 requests per flush cycle, about 17 MiB/s for librdkafka's 1 MB requests (Little's law, measured).
    # Lanes multiply a client's connections to this same agent; any lane accepts any partition, so lanes
    # change throughput, never correctness. Each lane has its own port, not just its own id: kafkajs
    # 2.2.4 keeps one broker object per host:port, and with several ids at one address it silently sends
    # only the partitions of the last id it saw (cluster/brokerPool.js, measured here).
    # Default 1, a single broker per agent: measured (docs/benchmarks.md), 4-16 lanes lift one idempotent
    # librdkafka producer from 17 to 45-50 MiB/s, but on a 2-core machine the client's own CPU grows with
    # its broker connections (1.1-1.5 cores against 0.12 with one) and eats the gain.
    lanes: int = 1
    # --kafka-cluster: show the live agents sharing the metadata store as the brokers (broker/cluster.py),
    # instead of this agent as the only one; agents heartbeat every cluster_heartbeat_s and leave the view
    # cluster_timeout_ms after their last heartbeat. 9 s is Kafka's broker.session.timeout.ms: an agent
    # restarted within it never leaves the view, as a restarted Kafka broker does not. One that leaves and
    # comes back costs clients more than the seconds in between: librdkafka decommissions a broker that
    # leaves Metadata, and a transactional producer whose cached group coordinator was that broker then
    # hangs in send_offsets_to_transaction past its timeout
    # (https://github.com/confluentinc/librdkafka/issues/5511). Measured (tests/eos, debug=eos,broker): with
    # 5 s, an agent restarted in about 6 s left Metadata for a moment and a producer hung so.
    cluster: bool = False
    cluster_heartbeat_s: float = 1.0
    cluster_timeout_ms: int = 9000
    # TLS on the listener (the same certificate and key as HTTP's): clients use security.protocol=SSL.
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    cluster_id: str = "strata"
    # Kafka's broker defaults: a Metadata request for an unknown topic creates it with num.partitions.
    auto_create_topics: bool = True
    num_partitions: int = 1
    # Kafka's socket.request.max.bytes: a frame declaring more closes the connection.
    max_request_bytes: int = 100 * MiB
    # Requests read from one connection but not yet answered; reading pauses at this many. librdkafka
    # sends one Produce request per partition and keeps up to 1,000,000 in flight without idempotence, so a
    # cap here holds a connection to (cap / ack latency) requests per second: measured, 1,000 throttled a
    # librdkafka producer at 3,000 small requests a second (linger.ms 5) and doubled the ack latency as
    # the cap and the latency fed each other. Request bytes are bounded by the produce buffer (every frame
    # is reserved from it before it is read); what this cap bounds is the per-request objects waiting for
    # their answer, about 2 KB each: 20 MB per connection at most.
    max_inflight_per_connection: int = 10_000
    max_connections: int = 1000
    # Kafka's connections.max.idle.ms: a connection that sends nothing and waits for no answer this long
    # is closed (10 minutes, Kafka's default).
    connections_max_idle_ms: int = 600_000
    # A request whose bytes stop arriving: once its first byte has waited this long for its last, the
    # connection is closed and what its frame reserved goes back at once. Kafka has no such bound (its
    # memory pool is fixed per socket); here a frame reserves produce memory before it is read.
    request_receive_timeout_ms: int = 30_000
    # Bytes of Fetch answers held at once over all connections (broker/budget.py).
    fetch_buffer_bytes: int = 64 * MiB
    # Large frames' buffers kept for use again (broker/frame_pool.py): an idempotent producer's window of
    # five requests of ~1 MiB, with room to spare. Idle ones stay resident, outside the produce budget.
    frame_pool_bytes: int = 8 * MiB
    # The ports the lanes are bound to, lane 0 first: set by the listener once bound (port 0 binds each
    # lane to a free port).
    bound_ports: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= self.lanes <= 64:
            raise SettingsError(f"STRATA_KAFKA_LANES must be 1 to 64, got {self.lanes}")
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise SettingsError("TLS needs both STRATA_TLS_CERT_FILE and STRATA_TLS_KEY_FILE")
        if self.cluster and self.lanes != 1:
            raise SettingsError(
                "STRATA_KAFKA_CLUSTER shows each agent as one broker: it needs STRATA_KAFKA_LANES=1"
            )
        if self.port and self.port + self.lanes - 1 > 65535:
            raise SettingsError(f"STRATA_KAFKA_PORT {self.port} + {self.lanes} lanes runs past port 65535")
        if self.cluster_timeout_ms < 3 * self.cluster_heartbeat_s * 1000:
            raise SettingsError(
                "STRATA_KAFKA_CLUSTER_TIMEOUT_MS must be at least three heartbeats"
                f" ({3 * self.cluster_heartbeat_s * 1000:.0f} ms), got {self.cluster_timeout_ms}"
            )
        if self.frame_pool_bytes < 0:
            raise SettingsError(
                f"STRATA_KAFKA_FRAME_POOL_BYTES must be 0 or more, got {self.frame_pool_bytes}"
            )
        if self.fetch_buffer_bytes < 1:
            raise SettingsError(
                f"STRATA_KAFKA_FETCH_BUFFER_BYTES must be positive, got {self.fetch_buffer_bytes}"
            )

    def lane_bind_port(self, lane: int) -> int:
        return self.port + lane if self.port else 0

    @property
    def brokers(self) -> list[tuple[int, str, int]]:
        """(broker id, advertised host, advertised port) of every lane, lane 0 first."""
        host = self.advertised_host or self.host
        out = []
        for lane in range(self.lanes):
            if self.advertised_port is not None:
                port = self.advertised_port + lane
            elif self.bound_ports:
                port = self.bound_ports[lane]
            else:
                port = self.lane_bind_port(lane)
            out.append((self.node_id + lane, host, port))
        return out

    def leader(self, topic: str, partition: int) -> int:
        """The broker id (lane) shown as the leader of ``topic``/``partition``: stable across agents and
        restarts, and consecutive partitions of one topic on consecutive lanes."""
        return self.node_id + (zlib.crc32(topic.encode()) + partition) % self.lanes

    @property
    def advertised(self) -> tuple[str, int]:
        """Lane 0's advertised address: the bootstrap address, and the group coordinator's."""
        _, host, port = self.brokers[0]
        return host, port

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server-side TLS context, or None for plaintext; SettingsError for unreadable files."""
        if self.tls_cert_file is None or self.tls_key_file is None:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(self.tls_cert_file, self.tls_key_file)
        except (OSError, ssl.SSLError) as exc:
            # The paths are named: OSError's own text for a missing file does not say which.
            raise SettingsError(
                f"cannot load the TLS certificate {self.tls_cert_file} with key {self.tls_key_file}: "
                f"{exc.strerror or exc}"
            ) from exc
        return context
