"""What the lake benchmark's phases share: the lake writer run in this process against an agent's data
directory (as ``strata lake run`` runs it), the writer as a process of its own (``strata lake run --loop``),
a table's status as operators read it, its polls, and lake-enabled topics.

In this process: ``LocalLake`` holds a ``LakeRound`` (``pipeline/lake/round.py``, the worker's and ``strata
lake run``'s entry point) on the agent's own metadata file and bucket, opened from the settings ``strata
serve --data-dir`` derives, and runs one forced round of one topic at a time: its wall time, its CPU time
(``time.process_time``: nothing else in this process works meanwhile) and the files it created under the
warehouse. The agent keeps running beside it, as it would beside a worker.

In a process of its own: ``start_writer`` runs ``strata lake run --loop``, which runs the lake round alone
(the worker role would run compaction rounds too), so that process's CPU is the writer's.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from bench.harness import Proc, module_cmd, spawn
from bench.lake_analysis import Sample, new_files
from bench.probes import proc_cpu_s
from storage.lake_config import COMMIT_INTERVAL, MODE, MODE_RAW

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from pipeline.lake.round import LakeRound
    from pipeline.lake.runs import LakeRun


def create_topic(url: str, name: str, partitions: int, configs: dict[str, str]) -> None:
    answer = httpx.post(
        f"{url}/v1/topics", json={"name": name, "partitions": partitions, "configs": configs}, timeout=30
    )
    if answer.status_code != 201:
        raise RuntimeError(f"creating {name}: {answer.status_code} {answer.text[:300]}")


def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes | None]]) -> int:
    """``records`` (key, value) produced with librdkafka in this process, acks=all, keys placed by Kafka's
    murmur2 partitioner; how many. Raises if any delivery failed."""
    from confluent_kafka import KafkaError, Producer

    failed: list[KafkaError] = []

    def report(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000}
    producer = Producer({**conf, "partitioner": "murmur2_random", "queue.buffering.max.kbytes": 262_144})
    sent = 0
    for key, value in records:
        while True:
            try:
                producer.produce(topic, value, key, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)  # the queue is full: serve delivery reports first
        sent += 1
    left = producer.flush(120)
    if left or failed:
        raise RuntimeError(f"producing to {topic}: {len(failed)} failed, {left} unsent; first: {failed[:1]}")
    return sent


def with_warmup(args: argparse.Namespace, seconds: float) -> argparse.Namespace:
    """``args`` as ``bench.kafka_load.run_producers`` reads them, with this phase's warm-up."""
    return argparse.Namespace(**{**vars(args), "warmup": seconds})


def lake_configs(interval_ms: int, mode: str = MODE_RAW, **extra: str) -> dict[str, str]:
    """A lake-enabled topic's configs: ``mode``, committed every ``interval_ms``, and ``extra``."""
    return {MODE: mode, COMMIT_INTERVAL: str(interval_ms), **extra}


def status(url: str, topic: str) -> dict[str, Any]:
    """``GET /v1/topics/{topic}/lake``: the status ``storage/lake_status.py`` computes."""
    answer = httpx.get(f"{url}/v1/topics/{topic}/lake", timeout=10)
    answer.raise_for_status()
    body: dict[str, Any] = answer.json()
    return body


def wait_for_commit(url: str, topic: str, timeout: float) -> dict[str, Any]:
    """Until the table of ``topic`` has a commit; its status. Raises with the last error otherwise."""
    deadline = time.monotonic() + timeout
    current = status(url, topic)
    while current.get("last_commit_ms") is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no lake commit of {topic} within {timeout:g} s: {current.get('last_error')}")
        time.sleep(0.2)
        current = status(url, topic)
    return current


class StatusPoller:
    """Polls a table's status every ``interval`` seconds in a thread, with the writer's CPU (``pid``, or 0
    for none) read just after each answer: the samples of ``bench.lake_analysis``."""

    def __init__(self, url: str, topic: str, pid: int = 0, interval: float = 0.25) -> None:
        self.url, self.topic, self.pid, self.interval = url, topic, pid, interval
        self.samples: list[Sample] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                body = status(self.url, self.topic)
            except httpx.HTTPError:
                self.errors += 1
            else:
                self.samples.append(
                    Sample(
                        time.time(),
                        body["lag_records"],
                        body["lag_seconds"],
                        sum(body["committed_offsets"].values()),
                        body["last_snapshot_id"],
                        body["last_commit_ms"],
                        proc_cpu_s(self.pid) if self.pid else 0.0,
                    )
                )
            self._stop.wait(self.interval)

    def __enter__(self) -> StatusPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def start_writer(
    data_dir: Path,
    workdir: Path,
    name: str,
    topic: str,
    max_bytes: int | None,
    buffer_bytes: int | None = None,
) -> Proc:
    """``strata lake run --loop`` for ``topic`` on the agent's data directory: a round every 500 ms, or
    sooner when the topic is due (``LakeRound.next_due_ms``: its commit interval has passed since its
    last run began, or the last run left it behind), as the worker's rounds do. ``max_bytes``:
    ``--lake-max-bytes-per-commit``; ``buffer_bytes``: ``--lake-write-buffer-bytes``."""
    cmd = module_cmd(
        "strata.cli", "lake", "run", "--loop", "-q", "--topic", topic, "--data-dir", str(data_dir)
    )
    cmd += ["--worker-interval-ms", "500"]
    if max_bytes:
        cmd += ["--lake-max-bytes-per-commit", str(max_bytes)]
    if buffer_bytes:
        cmd += ["--lake-write-buffer-bytes", str(buffer_bytes)]
    return spawn(name, cmd, workdir / f"{name}.log")


@dataclass(frozen=True)
class Committed:
    """One forced lake round of one topic in this process."""

    run: LakeRun
    wall_s: float
    cpu_s: float
    files: dict[str, dict[str, int]]  # created under the warehouse, by table and kind


class LocalLake:
    """The lake round of an agent's data directory, in this process (see the module's doc)."""

    def __init__(self, data_dir: Path) -> None:
        from pipeline.lake.round import LakeRound
        from storage.clock import SystemClock
        from storage.lake_catalog import open_catalog
        from storage.metadata import open_metadata_store
        from storage.objectstore import open_object_store
        from strata.settings import load_settings

        settings = load_settings({"data_dir": str(data_dir)})
        self.metadata = open_metadata_store(settings.metadata_url)
        self.store = open_object_store(settings.bucket_url)
        self.warehouse = Path(settings.bucket_url.removeprefix("file://")) / "lake"
        metadata_url, bucket_url = settings.metadata_url, settings.bucket_url
        self.round: LakeRound = LakeRound(
            self.metadata,
            self.store,
            lambda: open_catalog(metadata_url, bucket_url),
            SystemClock(),
            owner=f"lake-bench:{os.getpid()}",
        )

    def files(self) -> set[str]:
        if not self.warehouse.exists():
            return set()
        return {str(p.relative_to(self.warehouse)) for p in self.warehouse.rglob("*") if p.is_file()}

    def commit(self, topic: str) -> Committed:
        """One forced round of ``topic`` (``strata lake run --force --topic``): raises unless it committed."""
        from pipeline.lake.runs import COMMITTED

        before = self.files()
        wall, cpu = time.monotonic(), time.process_time()
        (run,) = self.round.run_once(topic, force=True).runs
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
        if run.outcome != COMMITTED:
            raise RuntimeError(f"the lake commit of {topic}: {run.outcome} ({run.error})")
        return Committed(run, wall, cpu, new_files(before, self.files()))

    def table(self, identifier: str) -> Table:
        return self.round.writer().catalog.load_table(identifier)

    def close(self) -> None:
        self.round.close()
        self.store.close()
        self.metadata.close()
