"""broker/produce_codec.py against kafka-python's Produce classes, byte for byte, at every version."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from broker import produce_codec
from storage.errors import BadRequest
from tests.examples import examples

VERSIONS = range(3, 10)

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20)
partitions = st.lists(
    st.tuples(st.integers(0, 2**31 - 1), st.one_of(st.none(), st.binary(max_size=64))), max_size=4
)
topics = st.lists(st.tuples(names, partitions), max_size=3)


def library_request(version: int, transactional_id: str | None, acks: int, timeout: int, data: list) -> bytes:
    T = ProduceRequest.TopicProduceData
    request = ProduceRequest[version](
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=timeout,
        topic_data=[
            T(name=name, partition_data=[T.PartitionProduceData(index=i, records=r) for i, r in parts])
            for name, parts in data
        ],
    )
    request.with_header(correlation_id=4242, client_id="codec-test")
    frame: bytes = request.encode(header=True)
    return frame


@settings(max_examples=examples(300), deadline=None)
@given(
    st.sampled_from(VERSIONS),
    st.one_of(st.none(), names),
    st.sampled_from([0, 1, -1]),
    st.integers(0, 2**31 - 1),
    topics,
)
def test_request_decodes_as_the_library_encodes(
    version: int, transactional_id: str | None, acks: int, timeout: int, data: list
) -> None:
    frame = library_request(version, transactional_id, acks, timeout, data)
    got = produce_codec.decode_request(frame)
    assert (got.API_VERSION, got.correlation_id, got.transactional_id, got.acks, got.timeout_ms) == (
        version,
        4242,
        transactional_id,
        acks,
        timeout,
    )
    assert [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in got.topic_data] == [
        (name, [(i, r) for i, r in parts]) for name, parts in data
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_truncated_or_padded_requests_are_bad_requests(version: int) -> None:
    frame = library_request(version, None, -1, 1000, [("t", [(0, b"x" * 10)])])
    for cut in range(len(frame)):
        with pytest.raises(BadRequest):
            produce_codec.decode_request(frame[:cut])
    with pytest.raises(BadRequest):
        produce_codec.decode_request(frame + b"\x00")


@settings(max_examples=examples(600), deadline=None)
@given(
    st.sampled_from(VERSIONS),
    st.one_of(st.none(), names),
    topics,
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=3),
)
def test_a_changed_request_is_refused_or_read_as_the_library_reads_it(
    version: int, transactional_id: str | None, data: list, changes: list[tuple[int, int]]
) -> None:
    """Bytes changed anywhere (a length, a count, a varint, a name): the decoder refuses them, or reads
    exactly what kafka-python's generated decoder reads. It never reads a field kafka-python does not."""
    frame = bytearray(library_request(version, transactional_id, -1, 1000, data))
    client_id = range(10, 10 + len("codec-test"))  # skipped, never decoded: kafka-python decodes it
    for at, byte in changes:
        if (at := at % len(frame)) not in client_id:
            frame[at] = byte
    try:
        got = produce_codec.decode_request(frame)
    except BadRequest:
        return
    library = ProduceRequest.decode(bytes(frame), version=got.API_VERSION, header=True)
    assert (got.correlation_id, got.transactional_id, got.acks, got.timeout_ms) == (
        library.header.correlation_id,
        library.transactional_id,
        library.acks,
        library.timeout_ms,
    )
    assert [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in got.topic_data] == [
        (t.name, [(p.index, p.records) for p in t.partition_data]) for t in library.topic_data
    ]


error_messages = st.one_of(st.none(), st.text(max_size=30))
responses = st.lists(
    st.tuples(
        names,
        st.lists(
            st.tuples(
                st.integers(0, 2**31 - 1),
                st.integers(-1, 100),
                st.integers(-1, 2**62),
                error_messages,
                st.lists(st.tuples(st.integers(0, 2**31 - 1), st.text(max_size=20)), max_size=3),
            ),
            max_size=4,
        ),
    ),
    max_size=3,
)


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(VERSIONS), st.integers(-(2**31), 2**31 - 1), responses)
def test_response_encodes_as_the_library_does(version: int, correlation_id: int, data: list) -> None:
    T = ProduceResponse.TopicProduceResponse
    P = T.PartitionProduceResponse
    library = ProduceResponse[version](
        responses=[
            T(
                name=name,
                partition_responses=[
                    P(
                        index=i,
                        error_code=code,
                        base_offset=offset,
                        log_append_time_ms=-1,
                        log_start_offset=-1,
                        record_errors=[
                            P.BatchIndexAndErrorMessage(batch_index=b, batch_index_error_message=m)
                            for b, m in record_errors
                        ],
                        error_message=message,
                    )
                    for i, code, offset, message, record_errors in parts
                ],
            )
            for name, parts in data
        ],
        throttle_time_ms=0,
    )
    library.with_header(correlation_id=correlation_id)
    expected = library.encode(header=True, framed=True)
    mine = produce_codec.encode_response(
        correlation_id,
        version,
        [(name, [produce_codec.PartitionResponse(*p) for p in parts]) for name, parts in data],
    )
    assert mine == expected


@settings(max_examples=examples(200), deadline=None)
@given(
    st.sampled_from(VERSIONS),
    st.integers(-(2**31), 2**31 - 1),
    names,
    st.integers(0, 2**31 - 1),
    st.integers(-1, 100),
    st.integers(-1, 2**62),
    st.integers(-1, 2**50),
    st.integers(-1, 2**62),
)
def test_a_one_partition_answer_encodes_as_the_library_does(
    version: int, correlation_id: int, name: str, index: int, code: int, offset: int, stamp: int, start: int
) -> None:
    """librdkafka's usual answer (one topic, one partition, no error message): encode_response's short
    path, with the append time and log start offset it carries."""
    T = ProduceResponse.TopicProduceResponse
    P = T.PartitionProduceResponse
    partition = P(
        index=index,
        error_code=code,
        base_offset=offset,
        log_append_time_ms=stamp,
        log_start_offset=start,
        record_errors=[],
        error_message=None,
    )
    library = ProduceResponse[version](
        responses=[T(name=name, partition_responses=[partition])], throttle_time_ms=0
    )
    library.with_header(correlation_id=correlation_id)
    mine = produce_codec.encode_response(
        correlation_id,
        version,
        [(name, [produce_codec.PartitionResponse(index, code, offset, None, [], stamp, start)])],
    )
    assert mine == library.encode(header=True, framed=True)
