"""Commit order: flushes commit in the order they were cut, and one connection's requests keep their order.

The agent test makes the first flush's upload slow and the second's fast. Without commit turns the second
flush would commit first and take the lower offsets; with them, offsets follow admission order.
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from agents.agent import Agent, AgentConfig
from agents.encode import ProduceRecord
from agents.metrics import Metrics
from storage.clock import SystemClock
from storage.metadata import open_metadata_store
from storage.objectstore.base import AsyncObjectStore, Body
from storage.objectstore.local import LocalAsyncObjectStore

pytestmark = pytest.mark.integration


class FirstPutWaits(AsyncObjectStore):
    """An object store whose first PUT waits until the test opens the gate; later PUTs go straight through."""

    def __init__(self, inner: AsyncObjectStore) -> None:
        self.inner = inner
        self.counters = inner.counters
        self.url = inner.url
        self.gate = asyncio.Event()
        self.first_waiting = asyncio.Event()
        self.later_put_done = asyncio.Event()
        self._first = True

    async def put(self, key: str, data: Body) -> None:
        if self._first:
            self._first = False
            self.first_waiting.set()
            await self.gate.wait()
            await self.inner.put(key, data)
            return
        await self.inner.put(key, data)
        self.later_put_done.set()

    async def get(self, key: str) -> bytes:
        return await self.inner.get(key)

    async def get_range(self, key: str, start: int, end: int) -> bytes:
        return await self.inner.get_range(key, start, end)


async def test_a_later_flush_that_uploads_first_still_commits_second(tmp_path: Path) -> None:
    store = FirstPutWaits(LocalAsyncObjectStore(tmp_path / "bucket"))
    metadata = open_metadata_store(f"sqlite:///{tmp_path / 'm.db'}")
    metadata.create_topic("t", 2, {}, 0)
    config = AgentConfig(flush_interval_ms=1, max_inflight_flushes=4)
    agent = Agent(config, store, metadata, Metrics(store.counters), SystemClock(), random.Random(7))
    await agent.start()
    try:
        both = [ProduceRecord(None, b"a", partition=0), ProduceRecord(None, b"a", partition=1)]
        first = asyncio.create_task(agent.produce_records("t", both))
        await asyncio.wait_for(store.first_waiting.wait(), 10)  # flush 0 is cut, its upload held
        second = asyncio.create_task(agent.produce_records("t", [ProduceRecord(None, b"b", partition=1)]))
        await asyncio.wait_for(store.later_put_done.wait(), 10)  # flush 1 uploaded
        await asyncio.sleep(0.05)  # time enough to commit, were it allowed to
        assert not second.done(), "flush 1 committed before flush 0, which was cut first"
        store.gate.set()
        assert await asyncio.wait_for(first, 10) == [(0, 0), (1, 0)]
        assert await asyncio.wait_for(second, 10) == [(1, 1)]
        assert agent.sequencer.next_turn == 2
    finally:
        store.gate.set()
        await agent.close()
        metadata.close()


def _http_request(path: str, body: dict[str, Any]) -> bytes:
    payload = orjson.dumps(body)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: strata\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload


def _read_responses(sock: socket.socket, n: int) -> list[dict[str, Any]]:
    buf = b""
    out: list[dict[str, Any]] = []
    while len(out) < n:
        chunk = sock.recv(65536)
        assert chunk, "connection closed early"
        buf += chunk
        while True:
            head_end = buf.find(b"\r\n\r\n")
            if head_end < 0:
                break
            head = buf[:head_end].decode("latin-1").lower()
            assert head.startswith("http/1.1 200"), head
            length = int(head.split("content-length:")[1].split("\r\n")[0])
            if len(buf) < head_end + 4 + length:
                break
            out.append(orjson.loads(buf[head_end + 4 : head_end + 4 + length]))
            buf = buf[head_end + 4 + length :]
    return out


def test_two_requests_back_to_back_on_one_connection_keep_their_order(
    server_factory: Callable[..., Any],
) -> None:
    with server_factory() as srv:
        srv.create_topic("ordered", partitions=3)
        host, port = srv.url.removeprefix("http://").split(":")
        for _ in range(5):
            a = {"records": [{"value": f"a{p}", "partition": p} for p in (0, 1, 2)]}
            b = {"records": [{"value": f"b{p}", "partition": p} for p in (2, 1)]}
            with socket.create_connection((host, int(port)), timeout=30) as sock:
                # Both requests in one write: B is on the wire before A is answered (HTTP/1.1 pipelining).
                sock.sendall(
                    _http_request("/v1/topics/ordered/records", a)
                    + _http_request("/v1/topics/ordered/records", b)
                )
                got_a, got_b = _read_responses(sock, 2)
            offset_a = {o["partition"]: o["offset"] for o in got_a["offsets"]}
            offset_b = {o["partition"]: o["offset"] for o in got_b["offsets"]}
            for partition in (1, 2):
                assert offset_b[partition] > offset_a[partition]
        for partition in (1, 2):
            values = [r["value"] for r in srv.read_all("ordered", partition)]
            assert values == [f"{x}{partition}" for _ in range(5) for x in ("a", "b")]
