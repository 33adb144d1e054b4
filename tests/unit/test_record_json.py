"""HTTP fetch's compiled JSON rendering (api/record_json.py) against the reference path.

The reference is ``agents.chunks.decode_fetch`` then ``api.models.record_out`` then orjson. For any chunks the
compiled renderer either declines (None) or gives the same records array (equal once parsed) and the same
next_offset; where the reference raises an error, the renderer declines, so the route answers with that
error. Batches are valid or broken at random, compressed or not, with text, non-UTF-8 and escaped
characters, headers, holes left by compaction, and any fetch offset and max_bytes.
"""

from __future__ import annotations

import dataclasses
import json
import struct

import orjson
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.chunks import ChunksResult, decode_fetch
from api import models
from api.record_json import render_records
from storage.errors import StrataError
from storage.metadata.rows import ChunkRow
from storage.records import Header, Record, compression, encode_batch
from tests.examples import examples

CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]
MANY = settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text is rendered eight bytes at a time up to the first byte needing more than a copy: pieces that put
# quotes, escapes, multi-byte characters and invalid UTF-8 (a lone lead byte, a surrogate, past U+10FFFF,
# overlong) at every position of a word, and across words.
_PIECES = [b"a", b"bcdefgh", b"ijklmnopqrstuvw", b'"', b"\\", b"\n", b"\x01", b"\x1f", b"\x7f"]
_PIECES += ["é".encode(), "€".encode(), "😀".encode()]
# Not UTF-8: a lone lead byte, a surrogate, past U+10FFFF, overlong.
_PIECES += [b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe0\x80\x80"]
_texty = st.lists(st.sampled_from(_PIECES), max_size=24).map(b"".join)
_bytes = st.none() | st.binary(max_size=12) | st.text(max_size=8).map(str.encode) | _texty
_header = st.builds(Header, key=st.text(max_size=5), value=st.none() | st.binary(max_size=6))


@st.composite
def chunk_records(draw: st.DrawFn) -> list[Record]:
    """Records with increasing offsets from 0 (gaps allowed: compaction's holes)."""
    n = draw(st.integers(1, 6))
    offsets = sorted(draw(st.sets(st.integers(0, 12), min_size=n, max_size=n)))
    return [
        Record(
            offset,
            draw(st.integers(0, 2**41)),
            draw(_bytes),
            draw(_bytes),
            tuple(draw(st.lists(_header, max_size=2))),
        )
        for offset in offsets
    ]


def chunk(chunk_id: int, base: int, batches: list[bytes], last: int) -> tuple[ChunkRow, bytes]:
    data = b"".join(batches)
    row = ChunkRow(chunk_id, "t", 0, base, last, 1, f"k{chunk_id}", 0, len(data), 0, 0, crc32c(data), True)
    return row, data


@st.composite
def fetches(draw: st.DrawFn, corrupt: bool = True) -> ChunksResult:
    loaded = []
    base = draw(st.integers(0, 2**40))
    for chunk_id in range(draw(st.integers(0, 3))):
        batches = []
        relative = 0
        for _ in range(draw(st.integers(1, 3))):
            recs = draw(chunk_records())
            shifted = [Record(r.offset + relative, r.timestamp, r.key, r.value, r.headers) for r in recs]
            batches.append(encode_batch(shifted, relative, codec=draw(st.sampled_from(CODECS))))
            relative = shifted[-1].offset + 1
        if corrupt and draw(st.booleans()):
            # A byte flipped past the batch header, CRCs made right again: a malformed record.
            batch = bytearray(batches[-1])
            if len(batch) > 61:
                at = draw(st.integers(61, len(batch) - 1))
                batch[at] ^= draw(st.integers(1, 255))
                struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
                batches[-1] = bytes(batch)
        last = relative - 1 + draw(st.integers(0, 3))  # removed offsets after the last record
        loaded.append(chunk(chunk_id, base, batches, last))
        base += last + 1
    first = loaded[0][0].base_offset if loaded else base
    offset = first + draw(st.integers(0, 8))
    return ChunksResult(loaded, offset, draw(st.integers(1, 200)), base, 0)


def reference(result: ChunksResult, encoding: models.Encoding) -> tuple[object, int] | StrataError:
    try:
        fetched = decode_fetch(result)
        return [models.record_out(r, encoding) for r in fetched.records], fetched.next_offset
    except StrataError as exc:
        return exc


@MANY
@given(fetches(), st.sampled_from(["utf8", "base64"]))
def test_rendered_answer_is_the_reference_answer(result: ChunksResult, encoding: models.Encoding) -> None:
    expected = reference(result, encoding)
    out = bytearray()
    rendered = render_records(result, encoding == "base64", out)
    if isinstance(expected, StrataError):
        assert rendered is None  # the route then answers with the reference's error
        return
    if rendered is None:
        return  # declined: the route answers through the reference
    count, next_offset = rendered
    records_json = bytes(out)
    records = json.loads(records_json)
    assert (records, next_offset) == (orjson.loads(orjson.dumps(expected[0])), expected[1])
    assert count == len(records)


@MANY
@given(fetches(corrupt=False))
def test_valid_batches_are_never_declined_in_base64(result: ChunksResult) -> None:
    """Any bytes are base64 text: valid batches, compressed or not, always take the compiled path."""
    expected = reference(result, "base64")
    out = bytearray()
    rendered = render_records(result, True, out)
    assert rendered is not None
    assert not isinstance(expected, StrataError)
    assert (json.loads(out), rendered[1]) == (expected[0], expected[1])


@MANY
@given(fetches(corrupt=False))
def test_utf8_declines_exactly_what_the_reference_refuses(result: ChunksResult) -> None:
    """Valid batches in utf8, every record fitting the answer: the compiled path declines exactly when some
    record is not UTF-8 text. (With a cut, it may also decline for the record just past the cut, which it
    renders before knowing it does not fit; the route then answers through the reference.)"""
    result = dataclasses.replace(result, max_bytes=1 << 40)
    expected = reference(result, "utf8")
    out = bytearray()
    rendered = render_records(result, False, out)
    if isinstance(expected, StrataError):
        assert rendered is None
        return
    assert rendered is not None
    assert (json.loads(out), rendered[1]) == (orjson.loads(orjson.dumps(expected[0])), expected[1])


@pytest.mark.parametrize("encoding", ["utf8", "base64"])
def test_plain_records_take_the_compiled_path(encoding: models.Encoding) -> None:
    """Text with quotes, backslashes and control characters, multi-byte UTF-8, headers, null fields."""
    recs = [
        Record(0, 5, b'k"\\\n\x00\x1f', "värde ✓ 𝄞".encode(), (Header("h\t", b"v"), Header("n", None))),
        Record(1, 6, None, None, ()),
        Record(3, -7, b"", b"", ()),
    ]
    result = ChunksResult([chunk(1, 100, [encode_batch(recs, 0)], 104)], 100, 1 << 20, 105, 0)
    out = bytearray(b"prefix ")
    rendered = render_records(result, encoding == "base64", out)
    assert rendered is not None
    count, next_offset = rendered
    expected = reference(result, encoding)
    assert not isinstance(expected, StrataError)
    assert out.startswith(b"prefix ")
    assert (json.loads(out[7:]), count, next_offset) == (expected[0], 3, 105)


@pytest.mark.parametrize("special", [p for p in _PIECES if len(p) < 5 and not p.isalpha()])
def test_a_special_byte_at_every_position_of_a_word(special: bytes) -> None:
    """The eight-bytes-at-a-time copy: one byte needing more than a copy, at each position of the first
    words, in keys, values and header values."""
    recs = [
        Record(i, i, b"k" * i + special, b"x" * i + special + b"y" * 17, (Header("h", special + b"z" * i),))
        for i in range(17)
    ]
    result = ChunksResult([chunk(1, 0, [encode_batch(recs, 0)], 16)], 0, 1 << 20, 17, 0)
    for encoding in ("utf8", "base64"):
        expected = reference(result, encoding)
        out = bytearray()
        rendered = render_records(result, encoding == "base64", out)
        if isinstance(expected, StrataError):
            assert rendered is None
            continue
        assert rendered is not None
        assert json.loads(out) == orjson.loads(orjson.dumps(expected[0]))


def test_non_utf8_value_is_declined_for_utf8_only() -> None:
    result = ChunksResult(
        [chunk(1, 0, [encode_batch([Record(0, 0, b"k", b"\xff", ())], 0)], 0)], 0, 100, 1, 0
    )
    assert render_records(result, False, bytearray()) is None
    assert render_records(result, True, bytearray()) is not None


def test_rendering_lets_other_threads_run() -> None:
    """render_run and render_batch run without the GIL (storage/_growbuf.h), so the agent's other threads
    (the S3 store's event loop receiving the next file) run meanwhile. With the GIL held through the
    call, another thread's Python code could run only at its edges, within a switch interval of each."""
    import threading
    import time

    from api._recordjson import render_run

    value = b"v" * 1000
    batch = encode_batch([Record(i, 0, b"k%d" % i, value, ()) for i in range(500)], 0)
    data = batch * 120  # ~58 MiB of the same batch: relative offsets repeat, which render_run allows
    seen: list[float] = []
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            seen.append(time.perf_counter())

    worker = threading.Thread(target=spin)
    worker.start()
    try:
        time.sleep(0.01)
        out = bytearray()
        started = time.perf_counter()
        rendered = render_run(out, data, 0, 0, 0, False, 0, 1 << 62, False)
        ended = time.perf_counter()
    finally:
        stop.set()
        worker.join()
    assert rendered is not None
    assert rendered[0] == 500 * 120
    inside = [t for t in seen if started <= t <= ended]
    assert inside, "no other thread ran while the records were rendered"
    # The other thread ran through most of the call, not only at its edges.
    assert inside[-1] - inside[0] >= 0.3 * (ended - started)
