"""Agent behaviours that need an injected component: a lost commit reply, the fetch cache."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from planner.round import CompactionRound, RoundConfig
from storage.errors import Unavailable
from storage.metadata import open_metadata_store
from storage.metadata.base import MetadataStore
from storage.metadata.rows import ChunkRow, FlushResult, IdempotencyEntry, NewChunk, NewFile
from storage.objectstore.base import GET
from tests.fixtures.server import local_settings, run_server

pytestmark = pytest.mark.integration


class LostCommitReplies:
    """A metadata store whose first ``n`` flush commits succeed but answer as if the connection dropped."""

    def __init__(self, inner: MetadataStore, n: int) -> None:
        self.inner = inner
        self.remaining = n

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def commit_flush(
        self,
        file: NewFile,
        chunks: Sequence[NewChunk],
        idem: Sequence[IdempotencyEntry],
        now_ms: int,
        *producer_args: Any,
    ) -> FlushResult:
        result = self.inner.commit_flush(file, chunks, idem, now_ms, *producer_args)
        if self.remaining > 0:
            self.remaining -= 1
            raise Unavailable("connection lost after COMMIT was sent")
        return result


def test_lost_commit_reply_is_replayed_not_duplicated(
    server_factory: Callable[..., Any], tmp_path: Path
) -> None:
    metadata = LostCommitReplies(open_metadata_store("sqlite:///" + str(tmp_path / "m.db")), n=2)
    with server_factory(metadata=metadata) as srv:
        srv.create_topic("t")
        first = srv.produce("t", [{"key": "k", "value": "one"}])
        assert first.status_code == 200
        assert first.json()["offsets"] == [{"partition": 0, "offset": 0}]
        second = srv.produce("t", [{"key": "k", "value": "two"}])
        assert second.json()["offsets"] == [{"partition": 0, "offset": 1}]
        body = srv.fetch("t", 0, 0).json()
        assert [r["value"] for r in body["records"]] == ["one", "two"]
        assert body["high_watermark"] == 2


def test_tailing_consumer_on_the_writing_agent_costs_no_get(
    tmp_path: Path, moto_server: str, s3_bucket: str
) -> None:
    # On a remote store the agent keeps what it flushed for tailing readers. (A local directory's reads
    # come from the OS page cache instead: the agent keeps no copy there, storage/objectstore/base.py.)
    settings = local_settings(tmp_path, bucket=f"s3://{s3_bucket}", s3_endpoint=moto_server)
    with run_server(settings) as srv:
        srv.create_topic("tail", partitions=2)
        position = [0, 0]
        gets = srv.runtime.counters.get(GET)
        for i in range(10):
            srv.produce("tail", [{"key": f"k{i}", "value": str(i)}])
            for partition in (0, 1):
                body = srv.fetch("tail", partition, position[partition]).json()
                position[partition] = body["next_offset"]
        assert sum(position) == 10
        assert srv.runtime.counters.get(GET) == gets


class StaleChunksOnce:
    """Answers the next find_chunks with rows captured earlier, as a lookup racing a compaction would."""

    def __init__(self, inner: MetadataStore) -> None:
        self.inner = inner
        self.stale: list[ChunkRow] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def find_chunks(self, topic: str, partition: int, offset: int, limit: int) -> list[ChunkRow]:
        if self.stale is not None:
            rows, self.stale = self.stale, None
            return rows
        return self.inner.find_chunks(topic, partition, offset, limit)


def test_fetch_survives_a_file_deleted_under_it(server_factory: Callable[..., Any], tmp_path: Path) -> None:
    metadata = StaleChunksOnce(open_metadata_store("sqlite:///" + str(tmp_path / "m.db")))
    with server_factory(metadata=metadata, cache_bytes=0) as srv:
        srv.create_topic("t", **{"cleanup.policy": "compact"})
        for i in range(3):
            srv.produce("t", [{"key": "k", "value": str(i)}])
        before = metadata.inner.find_chunks("t", 0, 0, 100)
        rt = srv.runtime
        compactor = CompactionRound(
            rt.store, metadata.inner, rt.clock, random.Random(1), "w", RoundConfig(obsolete_grace_ms=0)
        )
        compactor.run_once("t", force=True)  # rewrites the files and, with no grace, deletes the old ones
        assert not {c.object_key for c in before} & {f.object_key for f in metadata.inner.live_files()}
        metadata.stale = before
        body = srv.fetch("t", 0, 0).json()
        assert [r["value"] for r in body["records"]] == ["2"]


def test_http_catch_up_of_many_partitions_reads_each_file_once(
    server_factory: Callable[..., Any],
) -> None:
    """Consumers of 8 partitions catch up in turns, each fetch asking for more than the cache holds.

    Each fetch could read every file for its partition; with the cache too small to keep them until the
    other partitions' turns, they were read again for each partition. A one-partition fetch reads new
    files only when its next file is not cached, so the consumers move through the log together.
    """
    files, partitions = 24, 8
    # Files of ~70 KiB, read whole (<= 1/4 of the cache); half the cache admits 3 new ones per fetch.
    with server_factory(cache_bytes=512 * 1024) as srv:
        srv.create_topic("c", partitions=partitions)
        value = "v" * 1000
        for _ in range(files):  # one flush each: produce answers after its flush
            batch = [{"value": value, "partition": p} for p in range(partitions) for _copy in range(8)]
            assert srv.produce("c", batch).status_code == 200
        gets = srv.runtime.counters.get(GET)
        position = [0] * partitions
        done = [False] * partitions
        while not all(done):
            for p in range(partitions):
                if done[p]:
                    continue
                body = srv.fetch("c", p, position[p], max_bytes=8 * 1024 * 1024).json()
                position[p] = body["next_offset"]
                done[p] = position[p] >= body["high_watermark"]
        assert position == [files * 8] * partitions
        assert srv.runtime.counters.get(GET) - gets == files
