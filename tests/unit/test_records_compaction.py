"""scan_batch and filter_batch: what compaction reads and writes, against the full decoder."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from storage.records import (
    Header,
    Record,
    decode_records,
    encode_batch,
    filter_batch,
    iter_batches,
)
from storage.records.scan import scan_batch_reference
from tests.examples import examples

_records = st.lists(
    st.tuples(
        st.integers(1, 3),  # offset gap
        st.integers(-(10**6), 10**6),  # timestamp jitter
        st.one_of(st.none(), st.binary(max_size=8)),
        st.one_of(st.none(), st.binary(max_size=40)),
        st.lists(st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=4))), max_size=2),
    ),
    min_size=1,
    max_size=30,
)


def _build(
    spec: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]], base: int
) -> list[Record]:
    out, offset = [], base - 1
    for gap, jitter, key, value, headers in spec:
        offset += gap
        out.append(
            Record(offset, 1_700_000_000_000 + jitter, key, value, tuple(Header(k, v) for k, v in headers))
        )
    return out


@settings(max_examples=examples(150), deadline=None)
@given(_records, st.integers(0, 1000), st.integers(0, 10**6), st.data())
def test_scan_matches_decode_and_filter_keeps_exactly_the_chosen(
    spec: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    rel_base: int,
    chunk_base: int,
    data: st.DataObject,
) -> None:
    records = _build(spec, rel_base)
    raw = encode_batch(records, rel_base)
    ((header, view),) = list(iter_batches(raw))
    batch = bytes(view)
    spans = scan_batch_reference(batch, header, chunk_base)
    decoded = list(decode_records(raw, offset_base=chunk_base))
    assert [(s.offset, s.timestamp, s.key, s.tombstone) for s in spans] == [
        (r.offset, r.timestamp, r.key, r.value is None) for r in decoded
    ]
    keep = data.draw(st.lists(st.booleans(), min_size=len(spans), max_size=len(spans)))
    kept = [s for s, k in zip(spans, keep, strict=True) if k]
    if not kept:
        return
    new_base = data.draw(st.integers(0, rel_base))  # the batch moves into a chunk with a lower base
    shift = (chunk_base + rel_base) - new_base  # absolute = out_chunk_base + new_base + delta
    horizon = data.draw(st.one_of(st.none(), st.integers(0, 2**40)))
    out = filter_batch(
        batch, header, kept, offset_base=chunk_base, base_offset=new_base, delete_horizon_ms=horizon
    )
    got = list(decode_records(out, offset_base=shift))
    wanted = {s.offset for s in kept}
    assert got == [r for r in decoded if r.offset in wanted]
    ((out_header, _),) = list(iter_batches(out))
    assert out_header.base_offset == new_base
    assert out_header.last_offset_delta == header.last_offset_delta
    assert out_header.delete_horizon_ms == horizon
    assert out_header.max_timestamp == max(r.timestamp for r in got)


def test_horizon_is_kept_on_a_later_copy() -> None:
    records = [Record(0, 10, b"k", None), Record(1, 11, b"j", b"v")]
    raw = encode_batch(records, 0, delete_horizon_ms=5_000)
    ((header, view),) = list(iter_batches(raw))
    assert header.delete_horizon_ms == 5_000
    spans = scan_batch_reference(bytes(view), header)
    out = filter_batch(bytes(view), header, spans[:1], offset_base=0, base_offset=0)
    ((out_header, _),) = list(iter_batches(out))
    assert out_header.delete_horizon_ms == 5_000
    assert list(decode_records(out)) == records[:1]
