"""The Kafka listener: one asyncio TCP server per lane (broker/config.py says why lanes), whose
connections (broker/connection.py) all share one agent core and one connection limit."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from broker.cluster import ClusterView
from broker.connection import Connection
from broker.context import BrokerContext
from broker.frame_pool import FramePool
from storage.errors import StrataError

log = logging.getLogger("strata.kafka")

# How often connection deadlines are checked: they are seconds to minutes long.
SWEEP_INTERVAL_S = 1.0


class KafkaServer:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self._servers: list[asyncio.Server] = []
        self._connections: set[Connection] = set()
        self._none_left = asyncio.Event()
        self._none_left.set()
        self._sweeper: asyncio.Task[None] | None = None
        self.frames = FramePool(ctx.config.frame_pool_bytes)

    @property
    def port(self) -> int:
        """Lane 0's bound port, the bootstrap port (useful with port 0)."""
        return self.ctx.config.bound_ports[0]

    async def start(self) -> None:
        config = self.ctx.config
        loop = asyncio.get_running_loop()
        tls = config.ssl_context()
        try:
            for lane in range(config.lanes):
                self._servers.append(
                    await loop.create_server(
                        lambda: Connection(self.ctx, self), config.host, config.lane_bind_port(lane), ssl=tls
                    )
                )
        except OSError:
            await self.close()
            raise
        self._sweeper = asyncio.create_task(self._sweep())
        ports = tuple(int(server.sockets[0].getsockname()[1]) for server in self._servers)
        config = replace(config, bound_ports=ports)
        self.ctx = replace(self.ctx, config=config)
        if config.cluster:
            _, host, port = config.brokers[0]
            view = ClusterView(
                self.ctx.metadata,
                self.ctx.clock,
                host,
                port,
                config.node_id,
                config.cluster_heartbeat_s,
                config.cluster_timeout_ms,
            )
            try:
                await view.start()
            except StrataError:
                await self.close()
                raise
            # The registered node id is this agent's broker id (the coordinator, the controller).
            self.ctx = replace(self.ctx, config=replace(config, node_id=view.node_id), cluster=view)
        log.info(
            "Kafka listener on %s ports %s (advertised %s)",
            config.host,
            ",".join(map(str, ports)),
            ", ".join(f"{node}={host}:{port}" for node, host, port in self.ctx.brokers),
        )

    async def _sweep(self) -> None:
        """Every second, each connection's deadlines (broker/connection.py): one timer for the listener
        instead of one per connection and frame."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(SWEEP_INTERVAL_S)
            now = loop.time()
            for connection in list(self._connections):
                connection.check_deadlines(now)

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None
        if self.ctx.cluster is not None:
            await self.ctx.cluster.close()
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        for server in servers:
            await server.wait_closed()
        for connection in list(self._connections):
            connection.close()
        await self._none_left.wait()
        self.ctx.batch_checks.close()

    # --- the connections' registry (broker/connection.py) ---------------------------------------------------
    def opened(self, connection: Connection) -> bool:
        """Whether ``connection`` may stay open: at most ``max_connections`` at once."""
        if len(self._connections) >= self.ctx.config.max_connections:
            # Over max.connections: refuse at once rather than hold a socket nobody serves.
            log.warning("refusing a Kafka connection: %d connections open", self.ctx.config.max_connections)
            return False
        self._connections.add(connection)
        self._none_left.clear()
        return True

    def lost(self, connection: Connection) -> None:
        self._connections.discard(connection)
        if not self._connections:
            self._none_left.set()
