"""The Kafka listener: one asyncio TCP server per lane (broker/config.py says why lanes), whose
connections (broker/connection.py) all share one agent core and one connection limit."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from broker.connection import Connection
from broker.context import BrokerContext

log = logging.getLogger("strata.kafka")


class KafkaServer:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self._servers: list[asyncio.Server] = []
        self._connections: set[Connection] = set()
        self._none_left = asyncio.Event()
        self._none_left.set()

    @property
    def port(self) -> int:
        """Lane 0's bound port, the bootstrap port (useful with port 0)."""
        return self.ctx.config.bound_ports[0]

    async def start(self) -> None:
        config = self.ctx.config
        loop = asyncio.get_running_loop()
        try:
            for lane in range(config.lanes):
                self._servers.append(
                    await loop.create_server(
                        lambda: Connection(self.ctx, self), config.host, config.lane_bind_port(lane)
                    )
                )
        except OSError:
            await self.close()
            raise
        ports = tuple(int(server.sockets[0].getsockname()[1]) for server in self._servers)
        self.ctx = replace(self.ctx, config=replace(config, bound_ports=ports))
        log.info(
            "Kafka listener on %s ports %s (advertised %s)",
            config.host,
            ",".join(map(str, ports)),
            ", ".join(f"{node}={host}:{port}" for node, host, port in self.ctx.config.brokers),
        )

    async def close(self) -> None:
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        for server in servers:
            await server.wait_closed()
        for connection in list(self._connections):
            connection.close()
        await self._none_left.wait()

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
