"""Registered agents: the ``AgentRegistry`` role (the Kafka door's cluster view, broker/cluster.py).

A registration is one write transaction: delete the rows of agents whose heartbeat is older than the
timeout, then update this agent's row or insert it with a node id no live row holds. The UNIQUE node_id
makes two agents racing for one id fail one insert (a retried transaction then picks another).

One address, one row: in a cluster every agent advertises an address of its own, and two processes cannot
listen on one, so a row at this agent's address under another agent id is an earlier incarnation of it
(killed before it could deregister). The new one takes that row's place and its node id, as a restarted
Kafka broker keeps its broker.id: clients never see two brokers at one address, and a node id never moves
to another address while clients still hold the old one.
"""

from __future__ import annotations

from storage.metadata.rows import LiveAgent
from storage.metadata.sql.core import SqlBase, Tx


class AgentQueries(SqlBase):
    def register_agent(
        self, agent_id: str, host: str, port: int, wanted_node_id: int, now_ms: int, timeout_ms: int
    ) -> int:
        def work(tx: Tx) -> int:
            tx.execute(
                "DELETE FROM agents WHERE heartbeat_ms < ? AND agent_id <> ?", (now_ms - timeout_ms, agent_id)
            )
            row = tx.one("SELECT node_id FROM agents WHERE agent_id = ?", (agent_id,))
            if row is not None:
                tx.execute(
                    "UPDATE agents SET host = ?, port = ?, heartbeat_ms = ? WHERE agent_id = ?",
                    (host, port, now_ms, agent_id),
                )
                return int(row[0])
            earlier = tx.one(
                "SELECT node_id FROM agents WHERE host = ? AND port = ? ORDER BY heartbeat_ms DESC",
                (host, port),
            )
            tx.execute("DELETE FROM agents WHERE host = ? AND port = ?", (host, port))
            taken = {int(r[0]) for r in tx.all("SELECT node_id FROM agents")}
            if earlier is not None:
                node_id = int(earlier[0])  # free now: its row went, and UNIQUE kept it from any other
            elif wanted_node_id >= 0 and wanted_node_id not in taken:
                node_id = wanted_node_id
            else:
                node_id = 0
            while node_id in taken:
                node_id += 1
            tx.execute(
                "INSERT INTO agents (agent_id, node_id, host, port, heartbeat_ms) VALUES (?, ?, ?, ?, ?)",
                (agent_id, node_id, host, port, now_ms),
            )
            return node_id

        return self._backend.run(work, write=True, what="register_agent")

    def live_agents(self, now_ms: int, timeout_ms: int) -> list[LiveAgent]:
        rows = self._backend.run(
            lambda tx: tx.all(
                "SELECT node_id, host, port FROM agents WHERE heartbeat_ms >= ? ORDER BY node_id",
                (now_ms - timeout_ms,),
            ),
            write=False,
            what="live_agents",
        )
        return [LiveAgent(int(r[0]), str(r[1]), int(r[2])) for r in rows]

    def deregister_agent(self, agent_id: str) -> None:
        self._backend.run(
            lambda tx: tx.execute("DELETE FROM agents WHERE agent_id = ?", (agent_id,)),
            write=True,
            what="deregister_agent",
        )
