"""The Kafka listener: one asyncio TCP server per lane (broker/config.py says why lanes), whose
connections all share one agent core and one connection limit."""

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
        self._connections: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(ctx.config.max_connections)

    @property
    def port(self) -> int:
        """Lane 0's bound port, the bootstrap port (useful with port 0)."""
        return self.ctx.config.bound_ports[0]

    async def start(self) -> None:
        config = self.ctx.config
        try:
            for lane in range(config.lanes):
                self._servers.append(
                    await asyncio.start_server(self._accept, config.host, config.lane_bind_port(lane))
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
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._slots.locked():
            # Over max.connections: refuse at once rather than hold a socket nobody serves.
            log.warning("refusing a Kafka connection: %d connections open", self.ctx.config.max_connections)
            writer.close()
            return
        async with self._slots:
            task = asyncio.current_task()
            assert task is not None
            self._connections.add(task)
            try:
                await Connection(self.ctx, reader, writer).run()
            finally:
                self._connections.discard(task)
