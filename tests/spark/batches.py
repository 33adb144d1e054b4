"""Record batches and Strata files built by hand for the decoder tests: what Kafka clients write besides
what Strata writes (raw snappy, zstd frames without a content size, LogAppendTime, transactional batches),
decompression bombs, and files committed straight to a metadata store (no server)."""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cramjam
import zstandard
from crc32c import crc32c

from storage import fileformat, records
from storage.clock import SystemClock
from storage.keys import new_object_key
from storage.metadata import LEVEL_INGEST, NewChunk, NewFile, open_metadata_store
from storage.objectstore import open_object_store
from storage.records import compression

# How a batch's records are stored: Strata's codecs, and the two framings only other clients write.
KINDS = ("none", "gzip", "snappy", "lz4", "zstd", "raw-snappy", "zstd-no-size")
LOG_APPEND_TIME = 0x08
TRANSACTIONAL = 0x10


def with_records(batch: bytes, stored: bytes, attributes: int, producer_id: int | None = None) -> bytes:
    """``batch``'s 61-byte header over ``stored`` records, with ``attributes`` (and ``producer_id`` if
    given), batchLength and CRC redone."""
    out = bytearray(batch[: records.RECORD_BATCH_OVERHEAD]) + stored
    struct.pack_into(">i", out, 8, len(out) - records.LOG_OVERHEAD)
    struct.pack_into(">h", out, 21, attributes)
    if producer_id is not None:
        struct.pack_into(">q", out, 43, producer_id)
    fix_crc(out, 0, len(out))
    return bytes(out)


def fix_crc(buf: bytearray, start: int, end: int) -> None:
    """Recompute the CRC of the batch ``buf[start:end]`` (after an edit behind it)."""
    struct.pack_into(">I", buf, start + 17, crc32c(bytes(buf[start + 21 : end])))


def batch(
    recs: Sequence[records.Record],
    base_offset: int,
    kind: str = "none",
    *,
    flags: int = 0,
    producer_id: int | None = None,
) -> bytes:
    """One batch of ``recs`` stored as ``kind`` (see KINDS), with extra attribute ``flags`` (and
    ``producer_id``, else the encoder's -1)."""
    plain = records.encode_batch(recs, base_offset)
    section = plain[records.RECORD_BATCH_OVERHEAD :]
    if kind == "none":
        codec, stored = 0, section
    elif kind == "raw-snappy":  # librdkafka's framing: one raw block
        codec, stored = compression.SNAPPY, bytes(cramjam.snappy.compress_raw(section))
    elif kind == "zstd-no-size":  # a streaming writer's frame: no content size in its header
        codec = compression.ZSTD
        stored = zstandard.ZstdCompressor(write_content_size=False).compress(section)
    else:
        codec = compression.CODEC_IDS[kind]
        stored = compression.compress(codec, section)
    return with_records(plain, stored, codec | flags, producer_id)


def bomb(kind: str, size: int) -> bytes:
    """A batch of one record whose records section decompresses to ``size`` zero bytes."""
    header = records.encode_batch([records.Record(0, 1_700_000_000_000, b"k", b"v")], 0)
    codec = compression.CODEC_IDS[kind]
    return with_records(header, compression.compress(codec, bytes(size)), codec)


@dataclass(frozen=True)
class Chunk:
    topic: str
    partition: int
    data: bytes  # the chunk's batches; their offsets are relative to the chunk and dense (0..count-1)
    count: int
    min_timestamp: int = 0
    max_timestamp: int = 0


def commit_files(
    directory: Path, topics: dict[str, int], files: Sequence[Sequence[Chunk]]
) -> tuple[str, str]:
    """A SQLite metadata store and a local bucket under ``directory`` holding ``files`` (each a list of chunks
    in (topic, partition) order), committed as flushes: (metadata URL, bucket URL)."""
    metadata_url = f"sqlite:///{directory / 'metadata.db'}"
    bucket_url = f"file://{directory / 'bucket'}"
    clock = SystemClock()
    rng = random.Random(7)
    meta = open_metadata_store(metadata_url)
    store = open_object_store(bucket_url, retry=None)
    try:
        for topic, partitions in topics.items():
            meta.create_topic(topic, partitions, {}, clock.now_ms())
        for chunks in files:
            builder = fileformat.FileBuilder()
            new_chunks = []
            for c in chunks:
                m = builder.add_chunk(
                    c.topic,
                    c.partition,
                    c.data,
                    record_count=c.count,
                    last_offset_delta=c.count - 1,
                    min_timestamp=c.min_timestamp,
                    max_timestamp=c.max_timestamp,
                )
                new_chunks.append(
                    NewChunk(
                        c.topic,
                        c.partition,
                        c.count,
                        m.position,
                        m.length,
                        c.min_timestamp,
                        c.max_timestamp,
                        m.crc,
                    )
                )
            data = builder.finish()
            key = new_object_key(LEVEL_INGEST, clock, rng)
            store.put(key, data)
            meta.commit_flush(
                NewFile(key, len(data), LEVEL_INGEST, clock.now_ms()), new_chunks, [], clock.now_ms()
            )
    finally:
        store.close()
        meta.close()
    return metadata_url, bucket_url
