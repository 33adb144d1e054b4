"""The Kafka listener: an asyncio TCP server whose connections share one agent core."""

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
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(ctx.config.max_connections)

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        config = self.ctx.config
        self._server = await asyncio.start_server(self._accept, config.host, config.port)
        if config.port == 0:  # bound to a free port: advertise the one we got
            self.ctx = replace(self.ctx, config=replace(config, port=self.port))
            config = self.ctx.config
        log.info("Kafka listener on %s:%d (advertised %s:%d)", config.host, self.port, *config.advertised)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
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
