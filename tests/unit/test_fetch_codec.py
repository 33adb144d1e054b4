"""broker/fetch_codec.py against kafka-python's FetchResponse, byte for byte, at every version (4-12)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.fetch import FetchResponse

from broker import fetch_codec
from storage import records
from tests.examples import examples

VERSIONS = range(4, 13)

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20)
# A batch as stored: the base offset is relative to its chunk (0 here); the answer carries the absolute one.
batch_records = st.lists(
    st.tuples(st.one_of(st.none(), st.binary(max_size=8)), st.binary(max_size=40)), min_size=1, max_size=3
)
partition = st.tuples(
    st.integers(0, 2**31 - 1),
    st.sampled_from([0, 1, 3, 6, 76]),  # error codes, NONE among them
    st.integers(0, 2**40),  # high watermark
    st.integers(0, 2**40),  # log start offset
    st.lists(st.tuples(batch_records, st.integers(0, 2**62)), max_size=3),  # (records, absolute base)
    st.integers(-1, 2**40),  # last stable offset
    # aborted transactions: null (read_uncommitted) or (producer id, first offset) each
    st.one_of(st.none(), st.lists(st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)), max_size=3)),
)
topics = st.lists(st.tuples(names, st.lists(partition, max_size=4)), max_size=3)


def stored(recs: list[tuple[bytes | None, bytes]]) -> memoryview:
    return memoryview(
        records.encode_batch([records.Record(i, 1000 + i, k, v) for i, (k, v) in enumerate(recs)])
    )


def library_response(version: int, correlation_id: int, data: list) -> bytes:
    T = FetchResponse.FetchableTopicResponse
    P = T.PartitionData
    topic_list = []
    for name, parts in data:
        out = []
        for index, error, hwm, start, batches, lso, aborted in parts:
            joined = bytearray()
            for recs, base in batches:
                position = len(joined)
                joined += stored(recs)
                records.set_base_offset(joined, position, base)
            out.append(
                P(
                    partition_index=index,
                    error_code=error,
                    high_watermark=hwm,
                    last_stable_offset=lso,
                    log_start_offset=start,
                    aborted_transactions=None
                    if aborted is None
                    else [P.AbortedTransaction(producer_id=p, first_offset=f) for p, f in aborted],
                    preferred_read_replica=-1,
                    records=bytes(joined),
                )
            )
        topic_list.append(T(topic=name, partitions=out))
    response = FetchResponse[version](throttle_time_ms=0, error_code=0, session_id=0, responses=topic_list)
    response.with_header(correlation_id=correlation_id)
    frame: bytes = response.encode(header=True, framed=True)
    return frame


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(VERSIONS), st.integers(-(2**31), 2**31 - 1), topics)
def test_response_encodes_as_the_library_does(version: int, correlation_id: int, data: list) -> None:
    ours = fetch_codec.encode_response(
        correlation_id,
        version,
        [
            (
                name,
                [
                    fetch_codec.FetchedPartition(
                        index,
                        error,
                        hwm,
                        start,
                        [(stored(recs), base) for recs, base in batches],
                        lso,
                        aborted,
                    )
                    for index, error, hwm, start, batches, lso, aborted in parts
                ],
            )
            for name, parts in data
        ],
    )
    assert ours == library_response(version, correlation_id, data)


def test_a_stored_batch_is_served_with_its_absolute_base_offset_and_nothing_else_changed() -> None:
    batch = stored([(b"k", b"v"), (None, b"w")])
    frame = fetch_codec.encode_response(
        7, 12, [("t", [fetch_codec.FetchedPartition(0, 0, 12, 0, [(batch, 10)])])]
    )
    served = frame[-len(batch) - 3 : -3]  # then the partition's, topic's and response's tagged fields
    assert served[8:] == bytes(batch[8:])
    assert [(r.offset, r.key, r.value) for r in records.decode_records(served)] == [
        (10, b"k", b"v"),
        (11, None, b"w"),
    ]
    assert bytes(batch[:8]) == b"\x00" * 8  # the stored batch itself is untouched
