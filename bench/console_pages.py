"""How fast the console's API calls answer with 10,000 topics and a partition of a million records.

    python -m bench.console_pages [--topics 10000] [--records 1000000] [--repeat 20]

Starts ``strata serve`` (embedded default: a local directory and SQLite) on a fresh data directory, creates
the topics through the metadata store before the server starts (setup only), produces ``--records`` 100-byte
records into one partition over HTTP, then times each request the console's pages make (median and max of
``--repeat``, wall time on loopback with httpx). Nothing here is asserted: the figures go to
docs/benchmarks.md with the command that produced them.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.harness import AgentSpec, start_agent, stop_proc
from storage.metadata import open_metadata_store


def timed(client: httpx.Client, path: str, repeat: int) -> tuple[float, float, int]:
    samples = []
    size = 0
    for _ in range(repeat):
        started = time.perf_counter()
        answer = client.get(path)
        samples.append((time.perf_counter() - started) * 1000)
        if answer.status_code != 200:
            raise RuntimeError(f"{path}: {answer.status_code} {answer.text[:200]}")
        size = len(answer.content)
    return statistics.median(samples), max(samples), size


def create_topics(data: Path, topics: int, now: int) -> None:
    """``topics - 1`` topics of one partition and the compacted ``big``, straight into the metadata store."""
    metadata = open_metadata_store(f"sqlite:///{data / 'metadata.db'}")
    started = time.perf_counter()
    for i in range(topics - 1):
        metadata.create_topic(f"topic-{i:05d}", 1, {}, now)
    metadata.create_topic("big", 1, {"cleanup.policy": "compact"}, now)
    metadata.close()
    print(f"created {topics} topics in {time.perf_counter() - started:.1f} s")


def produce(client: httpx.Client, records: int) -> None:
    started = time.perf_counter()
    batch = 10_000
    for i in range(0, records, batch):
        body = {"records": [{"key": f"k{(i + j) % 50_000}", "value": "v" * 100} for j in range(batch)]}
        answer = client.post("/v1/topics/big/records", json=body)
        if answer.status_code != 200:
            raise RuntimeError(f"produce: {answer.status_code} {answer.text[:200]}")
    print(f"produced {records} records in {time.perf_counter() - started:.1f} s")


def pages(records: int, middle_ts: int) -> list[tuple[str, str]]:
    """(label, path) of every request the console's pages make."""
    mid = records // 2
    big = "/v1/topics/big/browse?partition=0"
    return [
        ("topic list, first page (detail, 50)", "/v1/topics?detail=true&limit=50"),
        ("topic list, page after topic-05000", "/v1/topics?detail=true&limit=50&after=topic-05000"),
        ("topic list, prefix topic-099", "/v1/topics?detail=true&limit=50&prefix=topic-099"),
        ("topic detail (big)", "/v1/topics/big"),
        ("partitions (big)", "/v1/topics/big/partitions"),
        ("compaction history (big)", "/v1/topics/big/compaction"),
        ("browse from the beginning (50)", f"{big}&limit=50"),
        ("browse from the end (50)", f"{big}&start=end&limit=50"),
        ("browse from the middle offset (50)", f"{big}&start=offset&offset={mid}&limit=50"),
        ("browse by timestamp (50)", f"{big}&start=timestamp&timestamp={middle_ts}&limit=50"),
        ("browse, value filter matching nothing (scan 10,000)", f"{big}&value_contains=zzz"),
        ("compaction jobs (50)", "/v1/compaction/jobs?limit=50"),
        ("groups (100)", "/v1/groups"),
        ("cluster", "/v1/cluster"),
        ("metrics history", "/v1/metrics/history"),
        ("console page", "/ui"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="strata-console-") as tmp:
        workdir = Path(tmp)
        (workdir / "data").mkdir()
        now = int(time.time() * 1000)
        create_topics(workdir / "data", args.topics, now)
        agent = start_agent(AgentSpec(["--log-level", "warning"]), workdir, "agent", "data")
        try:
            with httpx.Client(base_url=agent.url, timeout=60) as client:
                produce(client, args.records)
                # Every record is stamped after `now`: the first record's timestamp is a middle to look up.
                print("| request | median ms | max ms | bytes |\n| --- | --- | --- | --- |")
                for label, path in pages(args.records, now + 1):
                    median, worst, size = timed(client, path, args.repeat)
                    print(f"| {label} | {median:.1f} | {worst:.1f} | {size:,} |")
        finally:
            stop_proc(agent.proc, "console")


if __name__ == "__main__":
    main()
