"""Agent behaviours that need an injected component: a lost commit reply, the fetch cache."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from storage.errors import Unavailable
from storage.metadata import open_metadata_store
from storage.metadata.base import FlushResult, IdempotencyEntry, MetadataStore, NewChunk, NewFile
from storage.objectstore.base import GET

pytestmark = pytest.mark.integration


class LostCommitReplies:
    """A metadata store whose first ``n`` flush commits succeed but answer as if the connection dropped."""

    def __init__(self, inner: MetadataStore, n: int) -> None:
        self.inner = inner
        self.remaining = n

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def commit_flush(
        self, file: NewFile, chunks: Sequence[NewChunk], idem: Sequence[IdempotencyEntry], now_ms: int
    ) -> FlushResult:
        result = self.inner.commit_flush(file, chunks, idem, now_ms)
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


def test_tailing_consumer_on_the_writing_agent_costs_no_get(server_factory: Callable[..., Any]) -> None:
    with server_factory() as srv:
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
