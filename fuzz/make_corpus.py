"""Write the fuzz targets' seed corpus (fuzz/corpus/<target>/) from Strata's own encoders.

    python -m fuzz.make_corpus [directory]

Each record target's seeds are real uncompressed batches (storage.records.encode_batch, the reference
encoder for what the compiled one hands it, a LogAppendTime and an empty batch patched from them, CRCs
set right) of several shapes: plain, keyed and unkeyed, tombstones, headers with null values, negative
timestamp deltas, offset gaps as compaction leaves them, control characters and multi-byte UTF-8 in
values and header names, invalid UTF-8 values, multi-byte length varints; each behind the knobs its
harness reads (fuzz/inputs.py). fuzz_encode's seeds are requests of text records built by
fuzz.inputs.encode_input. The output is deterministic: rerunning rewrites the same files.
"""

from __future__ import annotations

import shutil
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crc32c import crc32c

from fuzz.inputs import HOUR_MS, INT64_MAX, INT64_MIN, NOW_MS, encode_input, knobs
from storage.records import Header, Record, encode_batch
from storage.records.encode import encode_batch_reference

ROOT = Path(__file__).resolve().parent / "corpus"
TS = 1_700_000_000_000


def _with_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def batches() -> Iterator[tuple[str, bytes]]:
    """(name, one uncompressed batch) for each shape."""

    def records(*rows: tuple[bytes | None, bytes | None], headers: tuple[Header, ...] = ()) -> list[Record]:
        return [Record(i, TS + i, key, value, headers) for i, (key, value) in enumerate(rows)]

    yield "one-record", encode_batch(records((b"key", b"value")))
    yield "null-key", encode_batch(records((None, b"no key"), (b"k", b"v")))
    yield "tombstone", encode_batch(records((b"gone", None), (None, None)))
    yield "empty-key-and-value", encode_batch(records((b"", b""), (b"k", b"")))
    yield (
        "headers",
        encode_batch(
            records(
                (b"k", b"v"),
                (b"k2", b"v2"),
                headers=(Header("trace-id", b"abc123"), Header("null-value", None), Header("", b"")),
            )
        ),
    )
    yield (
        "negative-timestamp-deltas",
        encode_batch([Record(i, TS - 1000 * i, b"k%d" % i, b"v") for i in range(4)]),
    )
    yield (
        "timestamps-far-apart",
        encode_batch([Record(0, 0, b"a", b"zero"), Record(1, 253_402_300_799_999, b"b", b"last ms")]),
    )
    yield (
        "offset-gaps",
        encode_batch([Record(o, TS, b"k%d" % o, b"v") for o in (0, 2, 7)], last_offset_delta=9),
    )
    yield (
        "control-characters",
        encode_batch(records((b"\x00\x01", b'tab\there "quoted" \\ \n\r\x1f\x7f\x08\x0c'))),
    )
    yield (
        "multibyte-utf8",
        encode_batch(
            records(
                ("clé".encode(), "€ 😀 ü ☃ \u0800\uffff\U0010ffff".encode()),
                headers=(Header("名前", "値".encode()), Header("emoji-😀", None)),
            )
        ),
    )
    yield (
        "invalid-utf8",
        encode_batch(
            records((b"\xc3", b"\xed\xa0\x80 surrogate"), (b"ok", b"\xf4\x90\x80\x80 \xe0\x80\x80"))
        ),
    )
    yield "long-value", encode_batch(records((b"k" * 130, bytes(range(256)) * 2)))
    guid = b"\x01" + bytes(range(16))
    yield (
        "schema-ids",  # Confluent's framings (registry/framing.py), as validation on produce reads them
        encode_batch(
            [
                Record(0, TS, b"\x00\x00\x00\x00\x07k", b"\x00\x00\x00\x00\x11avro"),
                Record(1, TS, b"k", b"\x00\x00\x00\x00\x11\x04\x02\x04proto"),
                Record(2, TS, None, None),
                Record(3, TS, b"k", b"raw", (Header("__value_schema_id", guid + b"\x00"),)),
                Record(
                    4, TS, b"k", b"raw", (Header("__key_schema_id", guid), Header("__value_schema_id", None))
                ),
                Record(5, TS, b"k", b"\x01short"),
            ]
        ),
    )
    yield (
        "many-records",
        encode_batch([Record(i, TS + i % 3, b"k%d" % (i % 5), b"v" * (i % 4)) for i in range(30)]),
    )
    horizon = encode_batch_reference(records((b"k", None), (b"k2", b"v")), delete_horizon_ms=TS + 86_400_000)
    yield "delete-horizon", horizon
    append_time = bytearray(encode_batch(records((b"k", b"v"), (None, b"w"))))
    struct.pack_into(">h", append_time, 21, 0x08)  # attributes: LogAppendTime
    yield "log-append-time", _with_crc(append_time)
    empty = bytearray(encode_batch(records((b"k", b"v"))))[:61]
    struct.pack_into(">i", empty, 8, 49)  # batchLength: the header alone
    struct.pack_into(">i", empty, 57, 0)  # recordsCount
    yield "no-records", _with_crc(empty)
    kafka = bytearray(encode_batch(records((b"k", b"v"), (b"k", b"w"))))
    struct.pack_into(">qhi", kafka, 43, 4242, 3, 17)  # producerId, producerEpoch, baseSequence
    yield "idempotent-producer", _with_crc(kafka)


def _chunk(rows: list[list[Record]]) -> tuple[bytes, int]:
    """Batches side by side, base offsets relative to the chunk, as a flush writes them; and the next
    batch's base offset."""
    out = b""
    base = 0
    for batch in rows:
        out += encode_batch(
            [Record(base + r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch], base
        )
        base += batch[-1].offset + 1
    return out, base


def record_seeds() -> dict[str, dict[str, bytes]]:
    shapes = dict(batches())
    half, whole = (1 << 63) // 2, INT64_MAX
    seeds: dict[str, dict[str, bytes]] = {
        "recordcheck": {},
        "keyscan": {},
        "recordcols": {},
        "recordjson": {},
    }
    for name, batch in shapes.items():
        seeds["recordcheck"][name] = knobs() + batch
        seeds["keyscan"][name] = knobs(a=1_000_000, b=0x0706050403020100, c=0x0F0E0D0C0B0A0908) + batch
        seeds["recordcols"][name] = knobs(a=0, b=INT64_MIN, c=whole) + batch
        seeds["recordjson"][name + "-utf8"] = knobs(flags=0, a=0, b=0, c=1 << 20) + batch
        seeds["recordjson"][name + "-base64"] = knobs(flags=1, a=0, b=0, c=1 << 20) + batch
    many = shapes["many-records"]
    seeds["keyscan"]["offsets-near-int64-max"] = knobs(a=whole - 20) + many
    seeds["recordcols"]["window"] = knobs(flags=1, a=100, b=105, c=120) + many
    seeds["recordcols"]["window-shifted-columns"] = knobs(flags=3, a=half, b=half, c=half + 3) + many
    seeds["recordcols"]["log-append-time-window"] = knobs(a=5, b=5, c=6) + shapes["log-append-time"]
    seeds["recordjson"]["max-bytes-cut"] = knobs(flags=2 | 32, a=0, b=3, c=150) + many
    seeds["recordjson"]["check-only"] = knobs(flags=0, c=-1) + shapes["headers"]
    seeds["recordjson"]["earlier-output"] = (
        knobs(flags=16 | 2, a=7, b=0, c=1 << 20) + shapes["multibyte-utf8"]
    )
    chunk, after = _chunk(
        [
            [Record(0, TS, b"a", b"one"), Record(1, TS - 5, None, "ü".encode())],
            [Record(0, TS + 1, b"b", None, (Header("h", b"x"),))],
            [Record(0, TS, b"c", b'"quoted"'), Record(3, TS, b"d", b"gap")],
        ]
    )
    seeds["recordjson"]["run-chunk-utf8"] = knobs(flags=4, a=1000, b=1000, c=1 << 20) + chunk
    seeds["recordjson"]["run-chunk-base64-cut"] = knobs(flags=4 | 1, a=1000, b=1001, c=60) + chunk
    seeds["recordjson"]["run-chunk-fix-crcs"] = knobs(flags=4 | 8 | 2 | 64, a=0, b=0, c=1 << 20) + chunk
    compressed = encode_batch([Record(after, TS, b"z", b"zstd")], after, codec=4)
    seeds["recordjson"]["run-stops-at-compressed"] = knobs(flags=4, a=0, b=0, c=1 << 20) + chunk + compressed
    return seeds


def encode_seeds() -> dict[str, bytes]:
    plain: list[dict[str, Any]] = [{"key": "user-1", "value": "hello"}, {"value": "no key"}]
    return {
        "plain": encode_input(plain),
        "null-values": encode_input([{"key": "k", "value": None}, {"key": None, "value": None}]),
        "headers": encode_input(
            [
                {
                    "key": "k",
                    "value": "v",
                    "headers": [
                        {"name": "trace", "value": "abc"},
                        {"name": "none", "value": None},
                        {"name": ""},
                    ],
                }
            ]
        ),
        "multibyte": encode_input(
            [{"key": "clé", "value": "€ 😀 \U0010ffff", "headers": [{"name": "名前", "value": "値"}]}]
        ),
        "control-characters": encode_input([{"key": "\x00", "value": 'tab\t"q"\\\n\x1f'}]),
        "timestamps": encode_input(
            [
                {"key": "a", "value": "now-1h", "timestamp": NOW_MS - HOUR_MS},
                {"key": "a", "value": "now+1m", "timestamp": NOW_MS + 60_000},
                {"key": "a", "value": "none", "timestamp": None},
            ]
        ),
        "timestamp-too-far": encode_input([{"key": "a", "value": "v", "timestamp": NOW_MS + 2 * HOUR_MS}]),
        "timestamp-negative": encode_input([{"key": "a", "value": "v", "timestamp": -1}], window=3),
        "partitions": encode_input(
            [{"value": "p0", "partition": 0}, {"value": "p3", "partition": 3}, {"value": "rr"}] * 2,
            round_robin=6,
        ),
        "partition-out-of-range": encode_input([{"value": "v", "partition": 4}]),
        "timestamp-past-64-bits": encode_input([{"key": "k", "value": "v", "timestamp": 2**64 + NOW_MS}]),
        "partition-as-text": encode_input([{"key": "k", "value": "v", "partition": "1"}]),
        "many-partitions": encode_input(
            [{"key": f"key-{i}", "value": "v" * i} for i in range(24)], partitions=32, round_robin=99
        ),
        "compacted": encode_input([{"key": "k", "value": "v"}, {"key": "k", "value": None}], compacted=True),
        "compacted-null-key": encode_input([{"value": "v"}], compacted=True),
        "too-large": encode_input([{"key": "k", "value": "v" * 200}], max_message_bytes=256),
        "lone-surrogate": encode_input([{"key": "k", "value": "\ud800"}]),
        "wrong-types": encode_input([{"key": 1, "value": "v"}, {"key": "k", "headers": [{"name": 1}]}]),
        "header-name-characters": encode_input(
            [{"key": "k", "value": "v", "headers": [{"name": "😀" * 40, "value": "x"}]}],
            max_message_bytes=160,
        ),
        "empty-request": encode_input([]),
    }


def main(argv: list[str]) -> None:
    root = Path(argv[1]) if len(argv) > 1 else ROOT
    seeds = record_seeds()
    seeds["encode"] = encode_seeds()
    for target, files in seeds.items():
        folder = root / target
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        print(f"{folder}: {len(files)} seeds")


if __name__ == "__main__":
    main(sys.argv)
