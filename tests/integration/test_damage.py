"""Damaged stored data never stalls a reader in silence, and an operator can find and quarantine it.

A chunk whose bytes are damaged on disk (its CRC-32C no longer matches) or whose records do not parse
(stored by a version that checked less: written here straight through the stores):
- HTTP fetch answers 50002 with the damaged range;
- a librdkafka consumer gets an error event (CORRUPT_MESSAGE from the broker), not silence;
- compaction fails that job, records the range, and leaves the file out of later plans;
- ``strata scan`` lists it (exit 1) and records it, ``strata damaged`` shows the log, and ``strata
  quarantine`` turns it into a hole that fetches move past, with the audit record kept.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from crc32c import crc32c

from storage import fileformat
from storage.metadata import LEVEL_INGEST, NewChunk, NewFile
from storage.metadata.rows import ChunkRow
from strata.cli import main as strata_main
from strata.runtime import Runtime

pytestmark = pytest.mark.integration

NOW = int(time.time() * 1000)


def _produce(srv: Any, topic: str, values: list[str]) -> None:
    response = srv.produce(topic, [{"key": "k", "value": v} for v in values])
    assert response.status_code == 200, response.text


def _chunk_at(runtime: Runtime, topic: str, offset: int) -> ChunkRow:
    (chunk,) = [
        c for c in runtime.metadata.find_chunks(topic, 0, 0, 100) if c.base_offset <= offset <= c.last_offset
    ]
    return chunk


def _flip_a_byte(data_dir: Path, chunk: ChunkRow) -> None:
    path = data_dir / "bucket" / chunk.object_key
    data = bytearray(path.read_bytes())
    data[chunk.position + chunk.length // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _store_garbage_chunk(runtime: Runtime, topic: str, count: int) -> None:
    """A flush whose one chunk is a batch with valid CRCs over records that do not parse, committed the
    way an older version stored what it did not check."""
    body = bytes((i * 37 + 11) % 256 for i in range(200))
    covered = struct.pack(">hiqqqhii", 0, count - 1, NOW, NOW, -1, -1, -1, count) + body
    batch = struct.pack(">qiibI", 0, 9 + len(covered), -1, 2, crc32c(covered)) + covered
    builder = fileformat.FileBuilder()
    meta = builder.add_chunk(
        topic, 0, batch, record_count=count, last_offset_delta=count - 1, min_timestamp=NOW, max_timestamp=NOW
    )
    data = builder.finish()
    key = f"L0/{uuid.uuid4().hex}"
    runtime.store.put(key, data)
    chunk = NewChunk(topic, 0, count, meta.position, meta.length, NOW, NOW, meta.crc)
    runtime.metadata.commit_flush(NewFile(key, len(data), LEVEL_INGEST, NOW), [chunk], [], NOW)


def _consumer_error(bootstrap: str, topic: str) -> tuple[list[bytes], KafkaError | None]:
    """What a consumer reads of partition 0 from offset 0 up to the first error or the partition's end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.time() + 30
        while time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                return values, None
            if error is not None:
                return values, error
            values.append(msg.value())
        pytest.fail(f"neither an error nor the end of {topic}/0 within 30 s; read {values}")
    finally:
        consumer.close()


def _cli(tmp_path: Path, *args: str) -> int:
    return strata_main([*args, "--data-dir", str(tmp_path / "data")])


@pytest.mark.parametrize("damage", ["flipped-byte", "garbage-records"])
def test_damage_is_reported_found_and_quarantined(
    server_factory: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    with server_factory() as srv:
        srv.create_topic("d")
        _produce(srv, "d", ["a", "b"])  # offsets 0..1
        if damage == "flipped-byte":
            _produce(srv, "d", ["c", "d", "e"])  # offsets 2..4, then damaged on disk
        else:
            _store_garbage_chunk(srv.runtime, "d", 3)  # offsets 2..4
        bad = _chunk_at(srv.runtime, "d", 2)
        _produce(srv, "d", ["f"])  # offset 5
    if damage == "flipped-byte":
        _flip_a_byte(tmp_path / "data", bad)
    with server_factory() as srv:  # a fresh agent: nothing of the files in its cache
        response = srv.fetch("d", 0, 2)
        assert response.status_code == 500
        body = response.json()
        assert body["error_code"] == 50002
        assert body["damaged"] == {
            "topic": "d",
            "partition": 0,
            "first_offset": 2,
            "last_offset": 4,
            "object_key": bad.object_key,
        }
        values, error = _consumer_error(srv.kafka_bootstrap, "d")
        assert values == [b"a", b"b"]
        assert error is not None, "the consumer sat at the damaged offset without an error"

        assert _cli(tmp_path, "scan") == 1
        out = capsys.readouterr().out
        assert f"d/0 offsets 2..4 ({bad.object_key})" in out
        assert _cli(tmp_path, "damaged") == 0
        assert '"first_offset": 2' in capsys.readouterr().out
        (row,) = srv.runtime.metadata.damaged_ranges("d")
        assert (row.first_offset, row.last_offset, row.found_by) == (2, 4, "strata scan")

        assert (
            _cli(
                tmp_path,
                "quarantine",
                "--topic",
                "d",
                "--partition",
                "0",
                "--offset",
                "3",
                "--reason",
                "test",
            )
            == 0
        )
        capsys.readouterr()
        records = srv.read_all("d", 0)
        assert [(r["offset"], r["value"]) for r in records] == [(0, "a"), (1, "b"), (5, "f")]
        values, error = _consumer_error(srv.kafka_bootstrap, "d")
        assert (values, error) == ([b"a", b"b", b"f"], None)
        (row,) = srv.runtime.metadata.damaged_ranges("d", quarantined=True)
        assert (row.reason, row.quarantined_by.startswith("User:")) == ("test", True)
        assert _cli(tmp_path, "scan") == 0


def test_compaction_reports_the_range_and_plans_around_it(
    server_factory: Callable[..., Any], tmp_path: Path
) -> None:
    with server_factory(l0_merge_files=4) as srv:
        srv.create_topic("c")
        for value in "abcdefgh":
            _produce(srv, "c", [value])  # eight L0 files, one record each: a merge is due
        bad = _chunk_at(srv.runtime, "c", 3)
    _flip_a_byte(tmp_path / "data", bad)
    with server_factory(l0_merge_files=4) as srv:
        compaction_round = srv.runtime.compaction_round()
        compaction_round.run_once()
        (row,) = srv.runtime.metadata.damaged_ranges("c")
        assert (row.first_offset, row.object_key) == (3, bad.object_key)
        assert row.found_by.startswith("compaction job ")
        # The next round merges the other seven files and leaves the damaged one alone.
        compaction_round.run_once()
        files = {c.object_key for c in srv.runtime.metadata.find_chunks("c", 0, 0, 100)}
        assert bad.object_key in files
        assert len(files) == 2, files  # the merged L1 file, and the damaged one
        assert [r["value"] for r in srv.read_all("c", 0, 4)] == ["e", "f", "g", "h"]
