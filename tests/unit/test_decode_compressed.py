"""The Spark reader's executor-side decoder (pipeline/decode.py) on chunks holding compressed batches."""

from __future__ import annotations

import pytest
from crc32c import crc32c

from pipeline.decode import decode_file
from pipeline.snapshot import ChunkTask
from storage import compression, records
from storage.errors import CodecError


def _records(first: int, n: int) -> list[records.Record]:
    return [
        records.Record(
            first + i,
            1_700_000_000_000 + i,
            f"k{first + i}".encode(),
            None if i == 3 else f"v{first + i} ".encode() * 30,
            (records.Header("h", b"x"),),
        )
        for i in range(n)
    ]


def test_decode_file_reads_chunks_of_every_codec() -> None:
    # One file, one chunk per codec (and one uncompressed), each holding two batches of 5 records.
    content = bytearray(b"header")
    tasks = []
    expected: list[records.Record] = []
    base = 100
    for codec in [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD, 0]:
        chunk = records.encode_batch(_records(0, 5), codec=codec) + records.encode_batch(
            _records(5, 5), base_offset=5, codec=codec
        )
        tasks.append(ChunkTask("t", 0, base, len(content), len(chunk), crc32c(chunk), base + 1, base + 10))
        expected += [
            records.Record(r.offset + base, r.timestamp, r.key, r.value, r.headers)
            for r in _records(0, 5) + _records(5, 5)
            if r.offset >= 1
        ]
        content += chunk
        base += 10
    batch = decode_file(bytes(content), tasks, include_headers=True)
    rows = batch.to_pylist()
    assert [(r["offset"], r["key"], r["value"]) for r in rows] == [
        (r.offset, r.key, r.value) for r in expected
    ]
    assert all(r["headers"] == [{"key": "h", "value": b"x"}] for r in rows)


def test_decode_file_refuses_a_corrupt_compressed_chunk() -> None:
    plain = records.encode_batch(_records(0, 5))
    header = next(records.iter_batches(plain))[0]
    lz4 = bytearray(records.recompress_batch(plain, header, compression.LZ4))
    lz4[-3] ^= 0xFF  # inside the lz4 stream; the batch CRC no longer matches either
    task = ChunkTask("t", 0, 0, 0, len(lz4), crc32c(bytes(lz4)), 0, 5)
    with pytest.raises(CodecError):
        decode_file(bytes(lz4), [task], include_headers=False)
