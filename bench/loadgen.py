"""HTTP load generator for bench.produce_fetch: one process, asyncio; produce with one aiohttp session
(or ``--client httpx``: one httpx.AsyncClient) per client, fetch with one aiohttp session.

    python -m bench.loadgen produce --url URL --topics a,b --clients N --records-per-request R \
        --start-file F --duration S --out O.json
    python -m bench.loadgen fetch --url URL --topics a,b --concurrency C --max-bytes B --timeout S \
        --out O.json

Writes one JSON object to ``--out``. Runs in its own process so that it does not share a GIL with the server
it measures; the orchestrator may start several and merge their results.

produce: N closed-loop clients, each sending its next request as soon as the previous one is answered.
Bodies are built and JSON-encoded once, before the clock starts (``--bodies`` distinct bodies, cycled), so
the client spends its CPU on HTTP, not on JSON. Records have 1 KiB (``--value-bytes``) printable ASCII values
and keys ``k000123`` drawn from ``--key-count`` keys, so they spread over every partition through Kafka's
partitioner. Once its bodies and its clients are built the process creates ``OUT.ready`` and waits (at most
120 s) for ``--start-file`` to hold a wall-clock time T, written by the orchestrator when every process is
ready; it sends at once, and requests answered before T are warm-up (so T is shared by all processes).
Throughput counts the requests answered inside [T, T + duration]; latency is taken over the
requests sent inside that window. After the window no new request is sent and answers are awaited for at
most ``--drain-timeout`` seconds. A 429 (or any other error) is counted and the client retries after
``--retry-ms``. ``--think-ms T`` makes each client pause a random 0..T ms after every answer, so that
clients acknowledged by the same flush do not all send their next request at the same instant.

fetch: reads every partition of the topics from offset 0 up to the high watermark seen at start, one
consumer per partition, at most C requests at a time, each with ``max_bytes`` B and ``max_wait_ms=0``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import ssl
import string
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import httpx
import orjson
import uvloop

from bench.loadrun import wait_for_start

MAX_REQUESTS_PER_CLIENT = 1_000_000


def build_bodies(
    n_bodies: int, records_per_request: int, value_bytes: int, key_count: int, seed: int
) -> list[tuple[bytes, int, int]]:
    """(JSON body, record count, key+value bytes) for each distinct request body."""
    rng = random.Random(seed)
    alphabet = (string.ascii_letters + string.digits).encode()
    # Random bytes mapped onto 62 printable characters: C speed, so that building 16 MiB of bodies takes
    # a fraction of a second even on a busy machine.
    to_printable = bytes(alphabet[i % len(alphabet)] for i in range(256))
    bodies = []
    for _ in range(n_bodies):
        recs = []
        payload = 0
        for _ in range(records_per_request):
            key = f"k{rng.randrange(key_count):06d}"
            value = rng.randbytes(value_bytes).translate(to_printable).decode()
            recs.append({"key": key, "value": value})
            payload += len(key) + len(value)
        bodies.append((orjson.dumps({"records": recs}), records_per_request, payload))
    return bodies


class Posters:
    """One HTTP connection per simulated client, through aiohttp or httpx; ``send`` returns the status.

    One connection per client, as a closed-loop client of its own would hold. aiohttp by default: its HTTP
    parser and request writer are compiled, where httpx's (h11) are Python and cost the generator about
    2 ms of CPU per 100 KiB request, enough for one generator process to be the ceiling it measures.
    ``--client httpx`` keeps that client for comparisons.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.aio: list[aiohttp.ClientSession] = []
        self.httpx: list[httpx.AsyncClient] = []
        if args.client == "aiohttp":
            timeout = aiohttp.ClientTimeout(total=60.0)
            self.aio = [
                aiohttp.ClientSession(
                    args.url,
                    timeout=timeout,
                    connector=aiohttp.TCPConnector(limit=1),
                    skip_auto_headers=("User-Agent",),
                )
                for _ in range(args.clients)
            ]
        else:
            # One AsyncClient per client too: httpcore's pool checks every idle connection of a shared pool
            # on each request, O(N) per request.
            limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
            # One TLS context for all (the URL is plain HTTP, but httpx builds a context per client
            # otherwise, which takes seconds for a hundred clients).
            tls = ssl.create_default_context()
            self.httpx = [
                httpx.AsyncClient(base_url=args.url, limits=limits, timeout=httpx.Timeout(60.0), verify=tls)
                for _ in range(args.clients)
            ]

    async def send(self, index: int, path: str, body: bytes, headers: dict[str, str]) -> int:
        if self.aio:
            async with self.aio[index].post(path, data=body, headers=headers) as answer:
                await answer.read()
                return answer.status
        response = await self.httpx[index].post(path, content=body, headers=headers)
        return response.status_code

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self.aio), return_exceptions=True)
        await asyncio.gather(*(c.aclose() for c in self.httpx), return_exceptions=True)


@dataclass
class Window:
    """The measured window in this process's perf_counter, and what the clients counted in it."""

    start: float
    end: float
    latencies: list[float] = field(default_factory=list)
    status: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    counts: Counter[str] = field(default_factory=Counter)  # ok_requests, ok_records, ok_payload_bytes, ...
    cpu: dict[str, float] = field(default_factory=dict)

    async def mark_cpu(self) -> None:
        await asyncio.sleep(max(0.0, self.start - time.perf_counter()))
        self.cpu["start"] = time.process_time()
        await asyncio.sleep(max(0.0, self.end - time.perf_counter()))
        self.cpu["end"] = time.process_time()


async def one_client(
    args: argparse.Namespace, index: int, post: Posters, bodies: list[tuple[bytes, int, int]], w: Window
) -> None:
    """One closed-loop client: its next request as soon as the previous one is answered."""
    topics = args.topics.split(",")
    think = random.Random(args.seed * 100_003 + index)
    path = f"/v1/topics/{topics[index % len(topics)]}/records"
    headers = {"content-type": "application/json"}
    for i in range(MAX_REQUESTS_PER_CLIENT):
        sent = time.perf_counter()
        if sent >= w.end:
            return
        body, nrecords, nbytes = bodies[(index + i) % len(bodies)]
        try:
            code = await post.send(index, path, body, headers)
        except (httpx.HTTPError, aiohttp.ClientError, TimeoutError) as exc:
            w.errors[type(exc).__name__] += 1
            await asyncio.sleep(args.retry_ms / 1000)
            continue
        done = time.perf_counter()
        w.status[str(code)] += 1
        if code != 200:
            await asyncio.sleep(args.retry_ms / 1000)
            continue
        w.counts["total_ok_records"] += nrecords
        if sent >= w.start:
            w.latencies.append((done - sent) * 1000)
        if w.start <= done <= w.end:
            w.counts["ok_requests"] += 1
            w.counts["ok_records"] += nrecords
            w.counts["ok_payload_bytes"] += nbytes
        if args.think_ms:
            await asyncio.sleep(think.uniform(0, args.think_ms) / 1000)


async def produce(args: argparse.Namespace, bodies: list[tuple[bytes, int, int]]) -> dict[str, Any]:
    # Every client exists before this process says it is ready: made after the start, they would eat the
    # first seconds of the window. (Made here, inside the loop, as aiohttp's sessions must be.)
    post = Posters(args)
    start_at = wait_for_start(args.out, args.start_file)
    # Wall-clock start shared with the other processes, converted to this process's perf_counter.
    window_start = time.perf_counter() + (start_at - time.time())
    w = Window(window_start, window_start + args.duration)
    try:
        marker = asyncio.create_task(w.mark_cpu())
        tasks = [asyncio.create_task(one_client(args, i, post, bodies, w)) for i in range(args.clients)]
        remaining = w.end - time.perf_counter() + args.drain_timeout
        _, late = await asyncio.wait(tasks, timeout=max(remaining, 0.1))
        for task in late:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await marker
    finally:
        await post.close()
    return {
        "clients": args.clients,
        "records_per_request": args.records_per_request,
        "value_bytes": args.value_bytes,
        "body_bytes": sum(len(b) for b, _, _ in bodies) // len(bodies),
        "window_s": args.duration,
        **{k: w.counts[k] for k in ("ok_requests", "ok_records", "ok_payload_bytes", "total_ok_records")},
        "latencies_ms": w.latencies,
        "status": dict(w.status),
        "errors": dict(w.errors),
        "unfinished_clients": len(late),
        "cpu_s": w.cpu.get("end", time.process_time()) - w.cpu.get("start", 0.0),
    }


async def fetch(args: argparse.Namespace) -> dict[str, Any]:
    topics = args.topics.split(",")
    status: Counter[str] = Counter()
    records = payload = response_bytes = requests = 0
    expected = 0
    incomplete = 0
    # aiohttp, not httpx, for the reads: its HTTP parser is compiled, where httpx's (h11) is Python; with
    # answers of 8 MiB httpx's parsing alone took the client a core of a 2-core machine.
    timeout = aiohttp.ClientTimeout(total=60.0)
    connector = aiohttp.TCPConnector(limit=args.concurrency + 1)
    async with aiohttp.ClientSession(args.url, timeout=timeout, connector=connector) as client:
        targets: list[tuple[str, int, int]] = []
        for topic in topics:
            async with client.get(f"/v1/topics/{topic}") as answer:
                answer.raise_for_status()
                described = orjson.loads(await answer.read())
            for p in described["partitions"]:
                targets.append((topic, p["partition"], p["high_watermark"]))
                expected += p["high_watermark"] - p["log_start_offset"]
        gate = asyncio.Semaphore(args.concurrency)
        deadline = time.perf_counter() + args.timeout
        cpu0 = time.process_time()
        started = time.perf_counter()

        async def consume(topic: str, partition: int, hwm: int) -> None:
            nonlocal records, payload, response_bytes, requests, incomplete
            url = f"/v1/topics/{topic}/partitions/{partition}/records"
            offset = 0
            for _ in range(MAX_REQUESTS_PER_CLIENT):
                if offset >= hwm:
                    return
                if time.perf_counter() >= deadline:
                    incomplete += 1
                    return
                params = {"offset": offset, "max_bytes": args.max_bytes, "max_wait_ms": 0}
                async with gate, client.get(url, params=params) as response:
                    code = response.status
                    content = await response.read()
                requests += 1
                status[str(code)] += 1
                if code != 200:
                    incomplete += 1
                    return
                response_bytes += len(content)
                body = orjson.loads(content)
                for rec in body["records"]:
                    payload += len(rec["key"] or "") + len(rec["value"] or "")
                records += len(body["records"])
                offset = body["next_offset"]

        await asyncio.gather(*(consume(t, p, h) for t, p, h in targets))
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu0
    return {
        "partitions": len(targets),
        "concurrency": args.concurrency,
        "max_bytes": args.max_bytes,
        "expected_records": expected,
        "records": records,
        "payload_bytes": payload,
        "response_bytes": response_bytes,
        "requests": requests,
        "elapsed_s": elapsed,
        "status": dict(status),
        "incomplete_partitions": incomplete,
        "cpu_s": cpu,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--url", required=True)
    p.add_argument("--topics", required=True, help="comma-separated; clients are spread round-robin")
    p.add_argument("--clients", type=int, required=True)
    p.add_argument("--records-per-request", type=int, required=True)
    p.add_argument("--value-bytes", type=int, default=1024)
    p.add_argument("--key-count", type=int, default=4096)
    p.add_argument("--bodies", type=int, default=16)
    p.add_argument("--start-file", required=True, help="file the orchestrator writes the start time to")
    p.add_argument("--duration", type=float, required=True)
    p.add_argument("--drain-timeout", type=float, default=30.0)
    p.add_argument("--retry-ms", type=float, default=10.0)
    p.add_argument("--think-ms", type=float, default=0.0, help="pause uniform in [0, T] ms after each answer")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--client", choices=("aiohttp", "httpx"), default="aiohttp", help="HTTP client library")
    f = sub.add_parser("fetch")
    f.add_argument("--url", required=True)
    f.add_argument("--topics", required=True)
    f.add_argument("--concurrency", type=int, default=8)
    f.add_argument("--max-bytes", type=int, default=8 * 1024 * 1024)
    f.add_argument("--timeout", type=float, default=60.0)
    for sp in (p, f):
        sp.add_argument("--out", required=True, help="JSON result file")
    args = parser.parse_args()
    if args.mode == "produce":
        bodies = build_bodies(
            args.bodies, args.records_per_request, args.value_bytes, args.key_count, args.seed
        )
        result = uvloop.run(produce(args, bodies))
    else:
        result = uvloop.run(fetch(args))
    # A file, not stdout: libuv may leave the stdout pipe non-blocking, and a large write to it can then be
    # cut short when the reader lags.
    with open(args.out, "wb") as fh:
        fh.write(orjson.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
