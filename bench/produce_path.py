"""The agent's own CPU per Produce request, from the frame's bytes to its answer's, in one process.

    python -m bench.produce_path [--seconds 5] [--connections 2] [--window 200] [--records 3]
                                 [--partitions 32] [--flush-class low-latency] [--profile OUT]

An agent on the embedded default (a local directory and SQLite, as ``strata serve`` builds it, on uvloop)
with one topic of ``--partitions`` partitions and the ``--flush-class`` class. ``--connections`` Kafka
connections (broker/connection.py) are fed Produce v7 frames as a socket would feed them
(``get_buffer`` / ``buffer_updated``), but from the same loop: each keeps ``--window`` requests
unanswered, of one partition each (as librdkafka sends them: round robin over the partitions), each one
uncompressed batch of ``--records`` records of 1 KiB values and 7-byte keys, acks=all. Their answers are
counted from a transport that keeps nothing.

So no socket, no client and no second process is measured: the figures are what the agent spends per
request on admission, buffering, flushing (its put and commit in their threads) and answering, at the rate
it saturates at. Requests a second, CPU per request (the loop thread's, ``time.thread_time``, and the
process's, every thread) and the flush steps' means. An answer carrying an error code stops the run.
``--profile OUT`` writes cProfile's statistics of the loop thread to OUT.

Why this exists beside bench/kafka_bench.py's latency phase: that phase shares two cores between the agent
and two librdkafka generators, and with the low-latency class the agent spends whatever CPU the requests
leave on more flushes, so its CPU per request hardly moves when the request path gets cheaper. Here only
the agent runs. The machine's hour still moves the figures (by a third between hours here), so compare
runs made alternately.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import struct
import tempfile
import threading
import time
from dataclasses import replace
from typing import Any

import uvloop
from prometheus_client import generate_latest

from bench import metrics
from bench.kafka_loadgen import value_pool
from bench.metrics import Scrape, delta, flush_steps_ms
from broker.connection import Connection
from storage.records import Record, encode_batch
from storage.topic_config import FLUSH_CLASS
from strata.runtime import build_runtime
from strata.server import tune_gc, tune_malloc
from strata.settings import Settings

TOPIC = "bench-path"
_FRAME_HEAD = struct.Struct(">ihhih5s")  # size, api key, version, correlation id, client id
_CORRELATION_ID = struct.Struct(">i")
_CORRELATION_AT = 8  # after the size, the API key and the version


def produce_frame(correlation_id: int, partition: int, batch: bytes) -> bytes:
    """A Produce v7 request (broker/produce_codec.py's layout): acks -1, one topic, one partition."""
    name = TOPIC.encode()
    body = (
        struct.pack(">hhi", -1, -1, 30_000)  # transactional id null, acks, timeout
        + struct.pack(">ih", 1, len(name))
        + name
        + struct.pack(">iii", 1, partition, len(batch))
        + batch
    )
    head = _FRAME_HEAD.pack(2 + 2 + 4 + 2 + 5 + len(body), 0, 7, correlation_id, 5, b"bench")
    return head + body


class _Transport:
    """What a connection writes its answers to: counted and dropped."""

    def __init__(self, client: _Client) -> None:
        self._client = client

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._client.answered(data)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Client:
    """One connection's producer: ``window`` requests unanswered, the next sent in the loop's next turn.
    Its frames are made once (``_frames``): building each request on the loop would be counted as the
    agent's CPU."""

    def __init__(self, connection: Connection, frames: list[bytearray], window: int, first: int) -> None:
        self.connection = connection
        self.frames = frames
        self.window = window
        self.sent = self.answers = self.errors = 0
        self.partition = first
        self._scheduled = False
        self._loop = asyncio.get_running_loop()

    def answered(self, data: bytes | bytearray | memoryview) -> None:
        at, n = 0, 0
        while at < len(data):  # several answers may come in one write
            (size,) = struct.unpack_from(">i", data, at)
            # v7's answer: correlation id, topic count, name, partition count, index, then the error code.
            (name_length,) = struct.unpack_from(">h", data, at + 12)
            (code,) = struct.unpack_from(">h", data, at + 14 + name_length + 8)
            if code:
                self.errors += 1
            at += 4 + size
            n += 1
        self.answers += n
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.send)

    def send(self) -> None:
        self._scheduled = False
        while self.sent - self.answers < self.window:
            self.partition = (self.partition + 1) % len(self.frames)
            frame = self.frames[self.partition]
            _CORRELATION_ID.pack_into(frame, _CORRELATION_AT, self.sent)
            self.sent += 1
            at = 0
            while at < len(frame):  # as a socket fills it: as much as the buffer offered, at a time
                view = self.connection.get_buffer(len(frame) - at)
                n = min(len(view), len(frame) - at)
                view[:n] = frame[at : at + n]
                self.connection.buffer_updated(n)
                at += n


def _frames(partitions: int, records: int) -> list[bytearray]:
    """A request's frame per partition; a client writes each request's correlation id into it."""
    (value,) = value_pool(1, 1024, 1, "text")  # the latency phase's kind of value (bench/kafka_loadgen.py)
    now = int(time.time() * 1000)
    batch = encode_batch([Record(i, now, b"key-%03d" % (i % 997), value) for i in range(records)])
    return [bytearray(produce_frame(0, partition, batch)) for partition in range(partitions)]


def _scrape(registry: Any) -> Scrape:
    return metrics.parse(generate_latest(registry).decode())


async def _run(args: argparse.Namespace, data_dir: str) -> dict[str, float]:
    settings = replace(Settings(data_dir=data_dir), host="127.0.0.1", kafka_port=0, role="agent")
    runtime = build_runtime(settings)
    await runtime.start()
    tune_gc()  # as strata serve, once started
    try:
        kafka = runtime.kafka
        assert kafka is not None
        configs = {FLUSH_CLASS: args.flush_class}
        runtime.metadata.create_topic(TOPIC, args.partitions, configs, int(time.time() * 1000))
        await runtime.agent.topic(TOPIC)
        clients = []
        for i in range(args.connections):
            connection = Connection(kafka.ctx, kafka)
            frames = _frames(args.partitions, args.records)  # a connection's own: ids are written into them
            client = _Client(connection, frames, args.window, i * args.partitions // args.connections)
            connection.connection_made(_Transport(client))  # type: ignore[arg-type]
            clients.append(client)
        for client in clients:
            client.send()
        await asyncio.sleep(args.warmup)
        profile = cProfile.Profile() if args.profile else None
        answered = sum(c.answers for c in clients)
        before = _scrape(runtime.metrics.registry)
        wall, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
        if profile is not None:
            profile.enable()
        await asyncio.sleep(args.seconds)
        if profile is not None:
            profile.disable()
            profile.dump_stats(args.profile)
        wall = time.perf_counter() - wall
        thread, process = time.thread_time() - thread, time.process_time() - process
        n = sum(c.answers for c in clients) - answered
        errors = sum(c.errors for c in clients)
        if errors:
            raise SystemExit(f"{errors} answers carried an error code")
        after = _scrape(runtime.metrics.registry)
        steps = flush_steps_ms(before, after)
        flushes = delta(before, after, "strata_flushes_total")
        for client in clients:
            client.window = 0  # send no more; the last answers drain
        await asyncio.sleep(0.5)
        for client in clients:
            client.connection.connection_lost(None)  # the listener's close waits for every connection
        return {
            "requests_per_s": n / wall,
            "loop_us_per_request": thread * 1e6 / n,
            "process_us_per_request": process * 1e6 / n,
            "loop_cores": thread / wall,
            "process_cores": process / wall,
            "flush_cycle_ms": wall * 1000 / flushes if flushes else 0.0,
            **{f"{step}_ms": ms or 0.0 for step, ms in steps.items()},
        }
    finally:
        await runtime.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--window", type=int, default=200)
    parser.add_argument("--records", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--flush-class", default="low-latency")
    parser.add_argument("--profile", default=None)
    args = parser.parse_args(argv)
    box: dict[str, dict[str, float]] = {}
    tune_malloc()

    def run() -> None:
        with tempfile.TemporaryDirectory(prefix="strata-path-") as data_dir:
            box["out"] = uvloop.run(_run(args, data_dir))

    # The loop in a thread of its own, so that time.thread_time() is the loop's alone.
    thread = threading.Thread(target=run, name="strata-path")
    thread.start()
    thread.join()
    out = box["out"]
    print(
        f"{out['requests_per_s']:,.0f} requests/s; CPU per request: loop "
        f"{out['loop_us_per_request']:.1f} µs, "
        f"process {out['process_us_per_request']:.1f} µs; loop {out['loop_cores']:.2f} cores, "
        f"process {out['process_cores']:.2f}; flush cycle {out['flush_cycle_ms']:.1f} ms (buffered "
        f"{out['buffered_ms']:.1f}, upload {out['upload_ms']:.1f}, turn {out['turn_ms']:.1f}, commit "
        f"{out['commit_ms']:.1f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
