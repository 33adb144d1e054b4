"""The fuzz targets' seeds (fuzz/corpus) and every input a fuzzer run found (fuzz/regressions), fed to the C
extensions through their Python API and held to the Python references' answers; no clang needed.

Each input is read as its harness reads it (fuzz/inputs.py, fuzz/fuzz.h). The references are the product's:
the reference decoder (storage/records/decode.py) for check_records and decode_columns, scan_batch_reference
for the column scan, decode_fetch's rules with record_out for the JSON rendering, and RequestEncoder.encode
for HTTP produce's encoding. Where a C loop may decline (return None so that the reference answers), a
decline must be one its module documents: bytes that do not read, text that is not UTF-8, a value outside
64 bits.
"""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c

from agents.chunks import record_size
from agents.encode import ProduceRecord, RequestEncoder
from agents.offsets import order_pairs
from api import models
from api._recordjson import render_batch, render_run
from fuzz.inputs import (
    INT64_MAX,
    INT64_MIN,
    NOW_MS,
    Knobs,
    batch_header,
    read_encode_input,
    read_knobs,
    wrap64,
)
from storage._recordcheck import check_records
from storage._recordcols import decode_columns
from storage.errors import CodecError, StrataError
from storage.metadata.rows import TopicInfo
from storage.records import BatchHeader, Header, Record, read_header
from storage.records.decode import decode_batch
from storage.records.scan import scan_batch_reference
from storage.topic_config import TopicConfig
from tests.unit.test_record_compiled import column_rows, expected_rows, outcome

FUZZ = Path(__file__).resolve().parents[2] / "fuzz"
TARGETS = ("recordcheck", "keyscan", "recordcols", "recordjson", "encode")


def inputs(target: str) -> list[Any]:
    """The target's seeds and regression inputs, each a test case named by its folder and file."""
    return [
        pytest.param(path.read_bytes(), id=f"{folder}/{path.name}")
        for folder in ("corpus", "regressions")
        if (FUZZ / folder / target).is_dir()
        for path in sorted((FUZZ / folder / target).iterdir())
    ]


def test_every_target_has_seeds() -> None:
    for target in TARGETS:
        assert len(list((FUZZ / "corpus" / target).iterdir())) >= 10, target


def record_input(data: bytes) -> tuple[Knobs, bytes, BatchHeader] | None:
    """The knobs, payload and header of a record target's input; None where its harness skips it."""
    read = read_knobs(data)
    if read is None:
        return None
    knobs, payload = read
    header = batch_header(payload)
    if header is None or header.records_count < 0:
        return None
    return knobs, payload, header


def reference_records(payload: bytes, header: BatchHeader, first_offset: int) -> list[Record] | None:
    """The reference decoder's records, first offset ``first_offset``; None when it refuses them."""
    try:
        return decode_batch(payload, 0, header, first_offset - header.base_offset)
    except CodecError:
        return None


def fits(records: list[Record]) -> bool:
    """Whether every offset and timestamp fits the C loops' 64 bits (they decline the others)."""
    return all(INT64_MIN <= n <= INT64_MAX for r in records for n in (r.offset, r.timestamp))


# --- storage/_recordcheck.c ------------------------------------------------------------------------------


@pytest.mark.parametrize("data", inputs("recordcheck"))
def test_record_check_gives_the_reference_verdict(data: bytes) -> None:
    case = record_input(data)
    if case is None:
        return
    _, payload, header = case
    # check_batch refuses LogAppendTime before the walk; the walk reads CreateTime timestamps.
    create_time = header._replace(attributes=header.attributes & ~0x08)
    records = reference_records(payload, create_time, 0)
    for compacted in (False, True):
        verdict, index, smallest, largest = check_records(
            payload,
            61,
            len(payload),
            header.records_count,
            header.last_offset_delta,
            header.base_timestamp,
            header.max_timestamp,
            compacted,
        )
        # The reference's Python ints never overflow; the C walk refuses a timestamp outside 64 bits.
        expected = (
            records is not None
            and fits(records)
            and not (compacted and any(r.key is None for r in records))
            and (not records or max(r.timestamp for r in records) == header.max_timestamp)
        )
        assert (verdict == 0) == expected, (verdict, index)
        if expected and records:
            assert (smallest, largest) == (min(r.timestamp for r in records), header.max_timestamp)


# --- storage/_keyscan.c ----------------------------------------------------------------------------------


@pytest.mark.parametrize("data", inputs("keyscan"))
def test_key_scan_gives_the_reference_answer(data: bytes) -> None:
    case = record_input(data)
    if case is None:
        return
    knobs, payload, header = case
    reference = outcome(lambda: scan_batch_reference(payload, header, knobs.a))
    columns = outcome(lambda: column_rows(payload, header, knobs.a))
    assert columns == expected_rows(reference)


# --- storage/_recordcols.c -------------------------------------------------------------------------------


def decoded_rows(columns: tuple[bytearray, ...], n: int) -> list[tuple[int, int, bytes | None, bytes | None]]:
    offsets, timestamps, key_ends, key_valid, key_data, value_ends, value_valid, value_data = columns

    def binary(ends: bytearray, valid: bytearray, data: bytearray) -> list[bytes | None]:
        out: list[bytes | None] = []
        start = 0
        for end, ok in zip(struct.unpack(f"={n}i", ends), valid, strict=True):
            out.append(bytes(data[start:end]) if ok else None)
            start = end
        return out

    return list(
        zip(
            struct.unpack(f"={n}q", offsets),
            struct.unpack(f"={n}q", timestamps),
            binary(key_ends, key_valid, key_data),
            binary(value_ends, value_valid, value_data),
            strict=True,
        )
    )


@pytest.mark.parametrize("data", inputs("recordcols"))
def test_record_columns_give_the_reference_rows(data: bytes) -> None:
    case = record_input(data)
    if case is None:
        return
    knobs, payload, header = case
    first_offset = wrap64(knobs.a + header.base_offset)
    columns = tuple(bytearray() for _ in range(8))
    n = decode_columns(
        columns,
        payload,
        61,
        len(payload),
        header.records_count,
        first_offset,
        header.base_timestamp,
        header.append_time,
        header.last_offset_delta,
        knobs.b,
        knobs.c,
    )
    records = reference_records(payload, header, first_offset)
    if records is None or not fits(records):
        assert n is None
        return
    assert n is not None
    window = [(r.offset, r.timestamp, r.key, r.value) for r in records if knobs.b <= r.offset < knobs.c]
    assert decoded_rows(columns, n) == window


# --- api/_recordjson.c -----------------------------------------------------------------------------------


def expected_answer(
    records: list[Record] | None, knobs: Knobs, base64: bool, size: int, nonempty: bool
) -> tuple[list[object], int, int, bool, bool] | None:
    """decode_fetch's cut and record_out's objects for ``records``; None where the C loop declines."""
    if records is None or not fits(records):
        return None
    encoding: models.Encoding = "base64" if base64 else "utf8"
    stopped, objects, next_offset = knobs.c < 0, [], -1
    for record in records:
        if stopped or record.offset < knobs.b:
            continue
        try:
            rendered = models.record_out(record, encoding)
        except StrataError:  # NotAcceptable: text that is not UTF-8, on a record the loop reached
            return None
        size_of = record_size(record)
        if nonempty and size + size_of > knobs.c:
            stopped = True
            continue
        if record.offset + 1 > INT64_MAX:
            return None  # the next offset leaves 64 bits
        nonempty, size, next_offset = True, size + size_of, record.offset + 1
        objects.append(rendered)
    return objects, next_offset, size, nonempty, stopped


def same_answer(out: bytearray, rendered: tuple[Any, ...] | None, expected: Any, nonempty: bool) -> None:
    if expected is None:
        assert rendered is None
        return
    assert rendered is not None
    objects, *progress = expected
    assert tuple(rendered[:5]) == (len(objects), *progress)
    answer = out.decode("utf-8")
    if nonempty and objects:
        assert answer.startswith(",")
        answer = answer[1:]
    assert json.loads("[" + answer + "]") == objects


def with_crcs(chunk: bytes) -> bytes:
    """fuzz_recordjson.c's fix_crcs: each batch's CRC-32C set where its length stays inside the chunk."""
    out = bytearray(chunk)
    pos = 0
    while len(out) - pos >= 61:
        size = 12 + struct.unpack_from(">i", out, pos + 8)[0]
        if size < 61 or size > len(out) - pos:
            break
        struct.pack_into(">I", out, pos + 17, crc32c(bytes(out[pos + 21 : pos + size])))
        pos += size
    return bytes(out)


def reference_run(chunk: bytes, offset_base: int) -> tuple[list[Record], int] | None:
    """The chunk's records up to its first compressed batch, and where that one starts; None where the
    reference path raises (read_header, batch_for_c's 64-bit first offset, the reference decoder)."""
    records: list[Record] = []
    pos = 0
    while pos < len(chunk):
        remaining = len(chunk) - pos
        if remaining < 61:
            return None
        size = 12 + struct.unpack_from(">i", chunk, pos + 8)[0]
        crc_ok = (
            61 <= size <= remaining
            and crc32c(chunk[pos + 21 : pos + size]) == struct.unpack_from(">I", chunk, pos + 17)[0]
        )
        if chunk[pos + 16] == 2 and crc_ok and struct.unpack_from(">h", chunk, pos + 21)[0] & 0x07:
            break  # compressed: render_run leaves it to the caller
        try:
            header = read_header(chunk, pos, True)
        except CodecError:
            return None
        if not 0 <= offset_base + header.base_offset <= INT64_MAX:
            return None
        try:
            records += decode_batch(chunk, pos, header, offset_base)
        except CodecError:
            return None
        pos += header.size
    return records, pos


@pytest.mark.parametrize("data", inputs("recordjson"))
def test_record_json_gives_the_reference_answer(data: bytes) -> None:
    read = read_knobs(data)
    if read is None:
        return
    knobs, payload = read
    base64, nonempty, run = bool(knobs.flags & 1), bool(knobs.flags & 2), bool(knobs.flags & 4)
    size = 100 * (knobs.flags >> 5) if nonempty else 0
    out = bytearray()
    if run:
        chunk = with_crcs(payload) if knobs.flags & 8 else payload
        offset_base = knobs.a & INT64_MAX
        rendered = render_run(out, chunk, 0, offset_base, knobs.b, base64, size, knobs.c, nonempty)
        walked = reference_run(chunk, offset_base)
        expected = expected_answer(walked and walked[0], knobs, base64, size, nonempty)
        same_answer(out, rendered, expected, nonempty)
        if rendered is not None and walked is not None:
            assert rendered[5] == walked[1]
        return
    header = batch_header(payload)
    if header is None or header.records_count < 0:
        return
    first_offset = wrap64(knobs.a + header.base_offset)
    rendered = render_batch(
        out,
        payload,
        61,
        len(payload),
        header.records_count,
        first_offset,
        header.base_timestamp,
        header.append_time,
        header.last_offset_delta,
        knobs.b,
        base64,
        size,
        knobs.c,
        nonempty,
    )
    records = reference_records(payload, header, first_offset)
    same_answer(out, rendered, expected_answer(records, knobs, base64, size, nonempty), nonempty)


# --- agents/_encode.c ------------------------------------------------------------------------------------


def produce_records(items: list[dict[str, Any]]) -> list[ProduceRecord] | None:
    """The HTTP door's records for ``items``; None where a field has a wrong type or no UTF-8 form (the
    door's validation refuses those before the encoder)."""

    def name(value: object) -> str:
        if not isinstance(value, str):
            raise TypeError(value)
        value.encode("utf-8")
        return value

    def text(value: object) -> bytes | None:
        return None if value is None else name(value).encode("utf-8")

    def integer(value: object) -> int | None:
        if value is not None and not isinstance(value, int):
            raise TypeError(value)
        return value

    try:
        return [
            ProduceRecord(
                text(item.get("key")),
                text(item.get("value")),
                tuple(Header(name(h["name"]), text(h.get("value"))) for h in item.get("headers", [])),
                integer(item.get("partition")),
                integer(item.get("timestamp")),
            )
            for item in items
        ]
    except (TypeError, UnicodeEncodeError):
        return None


@pytest.mark.parametrize("data", inputs("encode"))
def test_encode_gives_the_reference_batches(data: bytes) -> None:
    case = read_encode_input(data)
    if case is None:
        return
    info = TopicInfo("t", case.partitions, {}, 0)
    config = TopicConfig.from_overrides(
        {
            "max.message.bytes": str(case.max_message_bytes),
            "message.timestamp.before.max.ms": str(case.before_max_ms),
            "message.timestamp.after.max.ms": str(case.after_max_ms),
            "cleanup.policy": "compact" if case.compacted else "delete",
        }
    )
    fast_encoder, reference_encoder = RequestEncoder(random.Random(0)), RequestEncoder(random.Random(0))
    fast_encoder._round_robin["t"] = reference_encoder._round_robin["t"] = case.round_robin
    fast = fast_encoder.encode_text(info, config, case.items, NOW_MS)
    recs = produce_records(case.items)
    try:
        reference = None if recs is None else reference_encoder.encode(info, config, recs, NOW_MS)
    except StrataError:
        reference = None
    if reference is None:
        assert fast is None
        return
    assert fast is not None
    assert [(b.partition, b.record_count, bytes(b.data)) for b in fast.batches] == [
        (b.partition, b.record_count, bytes(b.data)) for b in reference.batches
    ]
    assert order_pairs(fast.order) == order_pairs(reference.order)
    assert fast_encoder._round_robin == reference_encoder._round_robin
