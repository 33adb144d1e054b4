"""No client can starve the others over the HTTP door: a body that stops arriving gets 408 (40801) at its
deadline with its reservation given back, and fetch answers share one memory budget, so a fetch that
cannot get its share in time is told to retry (429) instead of taking memory others need."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

pytestmark = pytest.mark.integration


def _wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {seconds} s")
        time.sleep(0.05)


def test_a_body_that_stops_arriving_gets_408_and_gives_its_memory_back(
    server_factory: Callable[..., Any],
) -> None:
    with server_factory(http_body_timeout_ms=1000) as srv:
        srv.create_topic("t")
        buffer = srv.runtime.agent.buffer
        url = urlsplit(srv.url)
        sock = socket.create_connection((url.hostname, url.port))
        head = (
            "POST /v1/topics/t/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 100000\r\n\r\n"
        )
        sock.sendall(head.encode() + b'{"records": [')
        # Reserved up front: the body's first bytes (Admission.FIRST_BYTES), not all it declared.
        _wait_for(lambda: buffer.arriving_bytes == 64 * 1024, 5, "the body's reservation")
        sock.settimeout(10)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        sock.close()
        status_line, _, rest = answer.partition(b"\r\n")
        assert b" 408 " in status_line, answer
        assert json.loads(rest.split(b"\r\n\r\n", 1)[1])["error_code"] == 40801
        _wait_for(lambda: buffer.reserved_bytes == 0 and buffer.arriving_bytes == 0, 5, "the memory's return")
        # The agent goes on serving everyone else.
        assert srv.produce("t", [{"value": "after"}]).status_code == 200


def test_a_body_reserves_what_has_arrived_as_it_arrives(server_factory: Callable[..., Any]) -> None:
    # Many clients declaring large bodies and sending them slowly hold what they sent (and each its first
    # 64 KiB) rather than what they declared; the last chunk moves the body out of the arriving share.
    with server_factory(buffer_bytes=16 << 20) as srv:
        srv.create_topic("t")
        buffer = srv.runtime.agent.buffer
        url = urlsplit(srv.url)
        head = (
            b"POST /v1/topics/t/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 4000000\r\n\r\n"
        )
        slow = [socket.create_connection((url.hostname, url.port)) for _ in range(20)]
        for sock in slow:
            sock.sendall(head + b'{"records": [')
        _wait_for(lambda: buffer.arriving_bytes == 20 * 64 * 1024, 5, "the bodies' first reservations")
        body = json.dumps({"records": [{"value": "v" * 1000} for _ in range(300)]}).encode()
        assert len(body) > 64 * 1024  # grows past its first reservation as its chunks come
        answer = httpx.post(
            f"{srv.url}/v1/topics/t/records",
            content=body,
            headers={"Content-Type": "application/json"},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        assert buffer.arriving_bytes == 20 * 64 * 1024
        for sock in slow:
            sock.close()
        _wait_for(lambda: buffer.reserved_bytes == 0 and buffer.arriving_bytes == 0, 5, "the memory's return")


def test_fetches_share_one_memory_budget(server_factory: Callable[..., Any]) -> None:
    with server_factory(http_fetch_buffer_bytes=1 << 20) as srv:
        srv.create_topic("t")
        holder: dict[str, httpx.Response] = {}

        def long_poll() -> None:  # an empty partition: this fetch waits its 3 s holding the whole budget
            holder["r"] = srv.fetch("t", 0, 0, max_wait_ms=3000, max_bytes=1 << 20)

        thread = threading.Thread(target=long_poll)
        thread.start()
        _wait_for(lambda: srv.runtime.http_fetch_budget.held > 0, 5, "the long poll's grant")
        refused = srv.fetch("t", 0, 0, max_wait_ms=0, max_bytes=1 << 20)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error_code"] == 42901
        assert refused.headers["Retry-After"]
        thread.join(10)
        assert holder["r"].status_code == 200
        _wait_for(lambda: srv.runtime.http_fetch_budget.held == 0, 5, "the grant's return")
        assert srv.fetch("t", 0, 0).status_code == 200
