"""The cluster view (``--kafka-cluster``): the agents sharing one metadata store shown to Kafka clients as
one cluster of brokers, each at its own advertised address.

Each agent registers in the metadata store (``AgentRegistry``) and heartbeats every ``heartbeat_s``; an
agent whose heartbeat is older than ``timeout_ms`` is dead and leaves the Metadata answer, so clients move
to the others. Node ids come from the registration: an agent restarted at its address takes its earlier
incarnation's id (and row), else the configured one if no live agent holds it, else the smallest free one.

Preferred leaders: each partition's leader is the live agent with the highest rendezvous hash of
(topic, partition, node id), WarpStream's idea: each partition's records then mostly arrive at one agent,
so fewer files hold each partition and compaction has less to merge; when an agent dies only its
partitions move. Any agent still accepts any partition (the agents share the log), so a client with a
stale view loses nothing: leadership only steers where clients send.

Without ``--kafka-cluster`` (the default) each agent is the only broker, as agents behind one
load-balanced address must be (broker/config.py, lanes).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid

from storage.clock import Clock
from storage.errors import StrataError
from storage.metadata.coordination import AgentRegistry
from storage.metadata.rows import LiveAgent

log = logging.getLogger("strata.kafka")


def rendezvous_leader(topic: str, partition: int, nodes: list[int]) -> int:
    """The node with the highest hash for (topic, partition): stable while the node set is, and only the
    partitions of a node that leaves (or of a node that comes) change leader."""
    key = f"{topic}\x00{partition}\x00".encode()

    def score(node: int) -> bytes:
        return hashlib.blake2b(key + node.to_bytes(4, "big", signed=True), digest_size=8).digest()

    return max(nodes, key=score)


class ClusterView:
    def __init__(
        self,
        registry: AgentRegistry,
        clock: Clock,
        host: str,
        port: int,
        wanted_node_id: int,
        heartbeat_s: float = 1.0,
        timeout_ms: int = 5000,
    ) -> None:
        self.registry = registry
        self.clock = clock
        self.host, self.port = host, port
        self.agent_id = str(uuid.uuid4())
        self.wanted_node_id = wanted_node_id
        self.heartbeat_s = heartbeat_s
        self.timeout_ms = timeout_ms
        self.node_id = -1
        # The view, recomputed once per heartbeat: Metadata asks for a leader per partition.
        self._brokers: list[tuple[int, str, int]] = []
        self._nodes: list[int] = []
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Register (raises Unavailable if the store is down: an agent that cannot join does not serve)."""
        await self._beat()
        self._task = asyncio.create_task(self._loop(), name="strata-cluster-heartbeat")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        try:
            await asyncio.to_thread(self.registry.deregister_agent, self.agent_id)
        except StrataError as exc:  # it expires from the view after the timeout anyway
            log.warning("could not deregister from the cluster: %s", exc.message)

    async def _beat(self) -> None:
        now = self.clock.now_ms()
        self.node_id = await asyncio.to_thread(
            self.registry.register_agent,
            self.agent_id,
            self.host,
            self.port,
            self.wanted_node_id,
            now,
            self.timeout_ms,
        )
        self._set_view(await asyncio.to_thread(self.registry.live_agents, now, self.timeout_ms))

    def _set_view(self, live: list[LiveAgent]) -> None:
        """Every live agent, this one always included (its own row may be a beat old)."""
        seen = {a.node_id: (a.node_id, a.host, a.port) for a in live}
        seen.setdefault(self.node_id, (self.node_id, self.host, self.port))
        self._brokers = [seen[n] for n in sorted(seen)]
        self._nodes = sorted(seen)

    async def _loop(self) -> None:
        while True:
            await self.clock.asleep(self.heartbeat_s)
            try:
                await self._beat()
            except StrataError as exc:  # the store down: keep the last view, try again next beat
                log.warning("cluster heartbeat failed: %s", exc.message)

    def brokers(self) -> list[tuple[int, str, int]]:
        """(node id, host, port) of every live agent, this one always included."""
        return self._brokers

    def leader(self, topic: str, partition: int) -> int:
        return rendezvous_leader(topic, partition, self._nodes)
