"""The Kafka listener's settings, as the composition root (api/) builds them from ``STRATA_*`` settings."""

from __future__ import annotations

from dataclasses import dataclass

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
    cluster_id: str = "strata"
    # Kafka's broker defaults: a Metadata request for an unknown topic creates it with num.partitions.
    auto_create_topics: bool = True
    num_partitions: int = 1
    # Kafka's socket.request.max.bytes: a frame declaring more closes the connection.
    max_request_bytes: int = 100 * MiB
    # Requests read from one connection but not yet answered; reading pauses at this many. librdkafka
    # sends one Produce request per partition and keeps up to 1,000,000 in flight without idempotence, so
    # a low cap here would hold a connection to (cap / flush interval) requests per second. Memory is
    # bounded separately: every frame's bytes are reserved from the produce buffer before it is read.
    max_inflight_per_connection: int = 1000
    max_connections: int = 1000

    @property
    def advertised(self) -> tuple[str, int]:
        return (self.advertised_host or self.host, self.advertised_port or self.port)
