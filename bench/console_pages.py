"""How fast the console's API calls answer with 10,000 topics and a partition of a million records.

    .venv/bin/python bench/console_pages.py [--topics 10000] [--records 1000000] [--repeat 20]

Starts ``strata serve`` (embedded default: a local directory and SQLite) on a fresh data directory, creates
the topics through the metadata store before the server starts (setup only), produces ``--records`` 100-byte
records into one partition over HTTP, then times each request the console's pages make (median and max of
``--repeat``, wall time on loopback with httpx). Nothing here is asserted: the figures go to
docs/benchmarks.md with the command that produced them.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from storage.metadata import open_metadata_store  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def timed(client: httpx.Client, path: str, repeat: int) -> tuple[float, float, int]:
    samples = []
    size = 0
    for _ in range(repeat):
        started = time.perf_counter()
        answer = client.get(path)
        samples.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, (path, answer.text[:200])
        size = len(answer.content)
    return statistics.median(samples), max(samples), size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="strata-console-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        metadata = open_metadata_store(f"sqlite:///{data / 'metadata.db'}")
        now = int(time.time() * 1000)
        started = time.perf_counter()
        for i in range(args.topics - 1):
            metadata.create_topic(f"topic-{i:05d}", 1, {}, now)
        metadata.create_topic("big", 1, {"cleanup.policy": "compact"}, now)
        metadata.close()
        print(f"created {args.topics} topics in {time.perf_counter() - started:.1f} s")
        port = free_port()
        env = {**os.environ, "STRATA_LOG_LEVEL": "warning"}
        server = subprocess.Popen(
            [
                str(ROOT / ".venv/bin/strata"),
                "serve",
                "--data-dir",
                str(data),
                "--port",
                str(port),
                "--kafka-port",
                "-1",
            ],
            env=env,
        )
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                deadline = time.monotonic() + 30
                while True:
                    try:
                        if client.get("/readyz").status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    if time.monotonic() > deadline:
                        raise SystemExit("the server did not start")
                    time.sleep(0.1)
                started = time.perf_counter()
                batch = 10_000
                for i in range(0, args.records, batch):
                    body = {
                        "records": [{"key": f"k{(i + j) % 50_000}", "value": "v" * 100} for j in range(batch)]
                    }
                    answer = client.post("/v1/topics/big/records", json=body)
                    assert answer.status_code == 200, answer.text[:200]
                middle_ts = now + 1  # every record is stamped after `now`: the first record's timestamp
                print(f"produced {args.records} records in {time.perf_counter() - started:.1f} s")
                mid = args.records // 2
                paths = [
                    ("topic list, first page (detail, 50)", "/v1/topics?detail=true&limit=50"),
                    (
                        "topic list, page after topic-05000",
                        "/v1/topics?detail=true&limit=50&after=topic-05000",
                    ),
                    ("topic list, prefix topic-099", "/v1/topics?detail=true&limit=50&prefix=topic-099"),
                    ("topic detail (big)", "/v1/topics/big"),
                    ("partitions (big)", "/v1/topics/big/partitions"),
                    ("compaction history (big)", "/v1/topics/big/compaction"),
                    ("browse from the beginning (50)", "/v1/topics/big/browse?partition=0&limit=50"),
                    ("browse from the end (50)", "/v1/topics/big/browse?partition=0&start=end&limit=50"),
                    (
                        "browse from the middle offset (50)",
                        f"/v1/topics/big/browse?partition=0&start=offset&offset={mid}&limit=50",
                    ),
                    (
                        "browse by timestamp (50)",
                        f"/v1/topics/big/browse?partition=0&start=timestamp&timestamp={middle_ts}&limit=50",
                    ),
                    (
                        "browse, value filter matching nothing (scan 10,000)",
                        "/v1/topics/big/browse?partition=0&value_contains=zzz",
                    ),
                    ("compaction jobs (50)", "/v1/compaction/jobs?limit=50"),
                    ("groups (100)", "/v1/groups"),
                    ("cluster", "/v1/cluster"),
                    ("metrics history", "/v1/metrics/history"),
                    ("console page", "/ui"),
                ]
                print("| request | median ms | max ms | bytes |\n| --- | --- | --- | --- |")
                for label, path in paths:
                    median, worst, size = timed(client, path, args.repeat)
                    print(f"| {label} | {median:.1f} | {worst:.1f} | {size:,} |")
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()


if __name__ == "__main__":
    main()
