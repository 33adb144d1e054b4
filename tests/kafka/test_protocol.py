"""The Kafka door's protocol obligations, checked frame by frame on a real listener."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from broker import apis, errors
from storage import records
from storage.objectstore.base import GET, AsyncObjectStore
from storage.objectstore.local import LocalAsyncObjectStore
from tests.fixtures.kafka import RunningBroker
from tests.kafka.wire import Wire

pytestmark = pytest.mark.integration


def batch(values: list[bytes], key: bytes | None = b"k", ts: int | None = None) -> bytes:
    now = ts if ts is not None else 1_700_000_000_000
    return records.encode_batch([records.Record(i, now, key, v) for i, v in enumerate(values)])


def produce(topic: str, partitions: dict[int, bytes], acks: int = -1, version: int = 7) -> ProduceRequest:
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    return ProduceRequest[version](
        transactional_id=None,
        acks=acks,
        timeout_ms=10_000,
        topic_data=[T(name=topic, partition_data=[P(index=i, records=r) for i, r in partitions.items()])],
    )


def partition_results(response: ProduceResponse) -> dict[int, tuple[int, int]]:
    return {p.index: (p.error_code, p.base_offset) for t in response.responses for p in t.partition_responses}


def create(broker: RunningBroker, topic: str, partitions: int = 1, **configs: str) -> None:
    broker.runtime.metadata.create_topic(topic, partitions, configs, 0)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_lists_exactly_the_table(broker: RunningBroker, version: int) -> None:
    with Wire(broker.port) as wire:
        response = wire.call(ApiVersionsRequest[version](), ApiVersionsResponse)
    assert response.error_code == 0
    got = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert got == {a.key: (a.min_version, a.max_version) for a in apis.TABLE.values()}


def test_unsupported_api_versions_gets_the_v0_error_not_a_closed_socket(broker: RunningBroker) -> None:
    with Wire(broker.port) as wire:
        request = ApiVersionsRequest[3](client_software_name="x", client_software_version="1")
        frame = bytearray(Wire.frame(request, 42))
        struct.pack_into(">h", frame, 6, 99)  # the version field of the header
        wire.send(bytes(frame))
        response = Wire.decode(wire.recv_frame(), ApiVersionsResponse, 0, 42)
        assert response.error_code == errors.UNSUPPORTED_VERSION
        assert {k.api_key for k in response.api_keys} == set(apis.TABLE)
        # The connection stays usable.
        assert wire.call(ApiVersionsRequest[2](), ApiVersionsResponse, 43).error_code == 0


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x00\x00\x02\x00\x00",  # a frame shorter than a header
        b"\x7f\xff\xff\xff",  # a frame larger than socket.request.max.bytes
        struct.pack(">ihhi", 10, 0, 7, 1) + b"\xff\xff",  # Produce v7 whose body is missing
        struct.pack(">ihhi", 8, 1234, 0, 1),  # an unknown API key
        struct.pack(">ihhi", 12, 3, 12, 1) + b"\xff\xff\xff\xff",  # Metadata v12, a huge topic array
    ],
)
def test_garbage_closes_the_connection_and_the_agent_keeps_serving(
    broker: RunningBroker, garbage: bytes
) -> None:
    with Wire(broker.port) as wire:
        wire.send(garbage)
        assert wire.closed_by_server()
    with Wire(broker.port) as wire:
        assert (
            wire.call(
                ApiVersionsRequest[3](client_software_name="x", client_software_version="1"),
                ApiVersionsResponse,
            ).error_code
            == 0
        )


def test_pipelined_produces_keep_their_order_and_responses_come_in_request_order(
    broker: RunningBroker,
) -> None:
    create(broker, "pipe", 2)
    with Wire(broker.port) as wire:
        frames = [
            Wire.frame(
                produce("pipe", {0: batch([f"a{i}".encode()]), 1: batch([f"b{i}".encode()] * 2)}), 100 + i
            )
            for i in range(5)
        ]
        wire.send(*frames)  # five requests on the wire before the first is answered
        results = [
            partition_results(Wire.decode(wire.recv_frame(), ProduceResponse, 7, 100 + i)) for i in range(5)
        ]
    assert [r[0] for r in results] == [(0, i) for i in range(5)]
    assert [r[1] for r in results] == [(0, 2 * i) for i in range(5)]


def test_acks_zero_gets_no_response_but_is_written(broker: RunningBroker) -> None:
    create(broker, "fire")
    with Wire(broker.port) as wire:
        wire.send(Wire.frame(produce("fire", {0: batch([b"x"])}, acks=0), 1))
        # The next response on the connection is the Metadata answer: nothing came for acks=0.
        response = wire.call(
            MetadataRequest[9](topics=None, allow_auto_topic_creation=False), MetadataResponse, 2
        )
        assert [t.name for t in response.topics] == ["fire"]
    broker_state = broker.runtime.metadata.partition_state
    for _ in range(100):
        if broker_state("fire", 0).high_watermark == 1:
            break
        time.sleep(0.05)
    assert broker_state("fire", 0).high_watermark == 1


def test_bad_batches_get_their_own_codes_and_store_nothing(broker: RunningBroker) -> None:
    create(broker, "bad", 6)
    create(broker, "compacted", 1, **{"cleanup.policy": "compact"})
    corrupt = bytearray(batch([b"x"]))
    corrupt[-1] ^= 0xFF
    compressed = bytearray(batch([b"x"]))
    struct.pack_into(
        ">h", compressed, 21, 5
    )  # codec 5: not one of Kafka's (the CRC no longer matches either)
    too_late = batch([b"x"], ts=2**50)
    with Wire(broker.port) as wire:
        response = wire.call(
            produce(
                "bad",
                {
                    0: bytes(corrupt),
                    1: bytes(compressed),
                    2: too_late,
                    3: b"\x00" * 5,
                    4: batch([b"ok"]),
                    9: batch([b"x"]),
                },
            ),
            ProduceResponse,
        )
        results = partition_results(response)
        assert results[0][0] == errors.CORRUPT_MESSAGE
        assert results[1][0] == errors.UNSUPPORTED_COMPRESSION_TYPE
        assert results[2][0] == errors.INVALID_TIMESTAMP
        assert results[3][0] == errors.INVALID_RECORD  # too short to be a batch: Kafka's code, not retried
        assert results[4] == (errors.NONE, 0)  # the good partition is written
        assert results[9][0] == errors.UNKNOWN_TOPIC_OR_PARTITION
        keyless = wire.call(produce("compacted", {0: batch([b"v"], key=None)}), ProduceResponse, 2)
        assert partition_results(keyless)[0][0] == errors.INVALID_RECORD
        unknown = wire.call(produce("nope", {0: batch([b"v"])}), ProduceResponse, 3)
        assert partition_results(unknown)[0][0] == errors.UNKNOWN_TOPIC_OR_PARTITION
    meta = broker.runtime.metadata
    assert [meta.partition_state("bad", p).high_watermark for p in range(6)] == [0, 0, 0, 0, 1, 0]
    assert meta.partition_state("compacted", 0).high_watermark == 0


def test_fetch_serves_batches_with_absolute_offsets_and_long_polls(broker: RunningBroker) -> None:
    create(broker, "f")
    with Wire(broker.port) as wire:
        for i in range(3):
            wire.call(produce("f", {0: batch([f"{i}a".encode(), f"{i}b".encode()])}), ProduceResponse, i)
        FT = FetchRequest.FetchTopic
        FP = FT.FetchPartition

        def fetch(offset: int, wait_ms: int = 0) -> FetchResponse:
            request = FetchRequest[11](
                replica_id=-1,
                max_wait_ms=wait_ms,
                min_bytes=1,
                max_bytes=1 << 20,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=[
                    FT(
                        topic="f",
                        partitions=[
                            FP(
                                partition=0,
                                current_leader_epoch=-1,
                                fetch_offset=offset,
                                log_start_offset=-1,
                                partition_max_bytes=1 << 20,
                            )
                        ],
                    )
                ],
                forgotten_topics_data=[],
                rack_id="",
            )
            return wire.call(request, FetchResponse, 50)

        part = fetch(3).responses[0].partitions[0]
        assert (part.error_code, part.high_watermark) == (0, 6)
        decoded = list(records.decode_records(part.records))
        assert [(r.offset, r.value) for r in decoded] == [(2, b"1a"), (3, b"1b"), (4, b"2a"), (5, b"2b")]
        empty = fetch(6, wait_ms=200).responses[0].partitions[0]
        assert (empty.error_code, empty.records) == (0, b"")
        out_of_range = fetch(7).responses[0].partitions[0]
        assert out_of_range.error_code == errors.OFFSET_OUT_OF_RANGE


def test_connections_past_the_limit_are_refused_and_others_keep_working(
    kafka_factory: Callable[..., Any],
) -> None:
    with kafka_factory(kafka_max_connections=2) as limited:
        with Wire(limited.port) as first, Wire(limited.port) as second:
            assert first.call(ApiVersionsRequest[2](), ApiVersionsResponse).error_code == 0
            assert second.call(ApiVersionsRequest[2](), ApiVersionsResponse).error_code == 0
            with Wire(limited.port) as third:
                assert third.closed_by_server()
            assert first.call(ApiVersionsRequest[2](), ApiVersionsResponse, 2).error_code == 0
        for _ in range(50):  # the slots free up once the first two are closed
            with Wire(limited.port) as again:
                try:
                    if again.call(ApiVersionsRequest[2](), ApiVersionsResponse).error_code == 0:
                        break
                except ConnectionError:
                    time.sleep(0.05)
        else:
            pytest.fail("no connection slot came free")


def test_a_fetch_of_many_partitions_reads_each_file_with_one_get(kafka_factory: Callable[..., Any]) -> None:
    with kafka_factory() as writer:
        write_one_wide_file(writer, "wide", 8)
    with kafka_factory() as reader:  # a fresh agent: nothing cached
        before = reader.runtime.counters.get(GET)
        with Wire(reader.port) as wire:
            parts = wire.call(fetch_request("wide", list(range(8))), FetchResponse).responses[0].partitions
        assert [len(list(records.decode_records(p.records))) for p in parts] == [5] * 8
        assert reader.runtime.counters.get(GET) - before == 1


def test_find_coordinator_answers_itself_for_groups_and_transactions(broker: RunningBroker) -> None:
    with Wire(broker.port) as wire:
        group = wire.call(FindCoordinatorRequest[3](key="g", key_type=0), FindCoordinatorResponse)
        assert (group.error_code, group.node_id, group.port) == (0, 0, broker.port)
        txn = wire.call(FindCoordinatorRequest[3](key="t", key_type=1), FindCoordinatorResponse, 2)
        assert (txn.error_code, txn.node_id, txn.port) == (0, 0, broker.port)


@pytest.mark.parametrize("lanes", [1, 4])
def test_lanes_show_one_agent_as_several_brokers(kafka_factory: Callable[..., Any], lanes: int) -> None:
    with kafka_factory(kafka_node_id=10, kafka_lanes=lanes) as broker:
        create(broker, "laned", 8)
        with Wire(broker.port) as wire:
            request = MetadataRequest[9](
                topics=[MetadataRequest.MetadataRequestTopic(name="laned")], allow_auto_topic_creation=False
            )
            meta = wire.call(request, MetadataResponse)
        brokers = {b.node_id: (b.host, b.port) for b in meta.brokers}
        assert sorted(brokers) == [10 + i for i in range(lanes)]
        assert brokers[10] == ("127.0.0.1", broker.port)  # lane 0 is the bootstrap address
        # A port per lane (free ports here, since the test binds port 0): kafkajs needs them distinct.
        assert len({port for _, port in brokers.values()}) == lanes
        assert meta.controller_id == 10
        leaders = {p.partition_index: p.leader_id for p in meta.topics[0].partitions}
        assert sorted(leaders) == list(range(8))
        # Consecutive partitions on consecutive lanes: every lane leads some partition.
        assert set(leaders.values()) == set(brokers)
        assert all(
            p.leader_epoch == -1 and p.replica_nodes == [p.leader_id] for p in meta.topics[0].partitions
        )

        # A real client connects to every lane and every partition takes records through its lane.
        from confluent_kafka import Producer

        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )
        for p in range(8):
            producer.produce("laned", value=b"v%d" % p, partition=p)
        assert producer.flush(30) == 0
        states = broker.runtime.metadata.partition_states("laned")
        assert [s.high_watermark for s in states] == [1] * 8


def test_lanes_out_of_range_is_a_settings_error(kafka_factory: Callable[..., Any]) -> None:
    from storage.errors import SettingsError

    with pytest.raises(SettingsError, match="STRATA_KAFKA_LANES"), kafka_factory(kafka_lanes=0):
        pass


def test_lanes_take_consecutive_ports_from_a_fixed_kafka_port(tmp_path: Any) -> None:
    from broker.config import BrokerConfig

    config = BrokerConfig(port=9092, node_id=100, lanes=3)
    assert config.brokers == [(100, "127.0.0.1", 9092), (101, "127.0.0.1", 9093), (102, "127.0.0.1", 9094)]
    behind_nat = BrokerConfig(port=9092, advertised_host="h", advertised_port=19092, node_id=1, lanes=2)
    assert behind_nat.brokers == [(1, "h", 19092), (2, "h", 19093)]
    assert behind_nat.advertised == ("h", 19092)


def test_a_client_gone_before_its_answer_leaves_no_error_and_the_agent_serves_on(
    broker: RunningBroker, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    create(broker, "gone")
    caplog.set_level(logging.INFO)
    for i in range(20):  # the answers wait for the flush; each client resets its connection first
        with Wire(broker.port) as wire:
            wire.send(Wire.frame(produce("gone", {0: batch([b"x"])}), 1))
            # SO_LINGER 0: close() sends a reset, so the agent's transport closes under the pending answer.
            wire.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            time.sleep(0.01 * i)
    for _ in range(100):
        if broker.runtime.metadata.partition_state("gone", 0).high_watermark == 20:
            break
        time.sleep(0.05)
    time.sleep(0.3)  # the flush answered into the closed connection
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    with Wire(broker.port) as wire:
        response = wire.call(produce("gone", {0: batch([b"y"])}), ProduceResponse, 2)
        assert partition_results(response) == {0: (0, 20)}


def fetch_request(
    topic: str, partitions: list[int] | dict[int, int], offset: int = 0, version: int = 11
) -> FetchRequest:
    """A Fetch of ``partitions`` from ``offset``, or from each partition's own offset given a dict."""
    offsets = partitions if isinstance(partitions, dict) else dict.fromkeys(partitions, offset)
    FT = FetchRequest.FetchTopic
    return FetchRequest[version](
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 24,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        forgotten_topics_data=[],
        rack_id="",
        topics=[
            FT(
                topic=topic,
                partitions=[
                    FT.FetchPartition(
                        partition=p,
                        current_leader_epoch=-1,
                        fetch_offset=o,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                    for p, o in offsets.items()
                ],
            )
        ],
    )


def write_one_wide_file(broker: RunningBroker, topic: str, partitions: int) -> None:
    create(broker, topic, partitions)
    with Wire(broker.port) as wire:
        # One request, one flush: one file holding a chunk for each partition.
        request = produce(topic, {p: batch([b"x" * 1000] * 5) for p in range(partitions)})
        response = wire.call(request, ProduceResponse)
        assert all(code == 0 for code, _ in partition_results(response).values())


@pytest.mark.parametrize("concurrent", [False, True])
def test_fetches_of_one_file_share_one_whole_file_get(
    kafka_factory: Callable[..., Any], tmp_path: Any, concurrent: bool
) -> None:
    import concurrent.futures

    with kafka_factory() as writer:
        write_one_wide_file(writer, "shared", 8)
    with kafka_factory() as reader:  # a fresh agent: nothing cached
        before = reader.runtime.counters.get(GET)

        def one(p: int) -> int:
            with Wire(reader.port) as wire:
                (part,) = wire.call(fetch_request("shared", [p]), FetchResponse).responses[0].partitions
                assert part.error_code == 0
                return len(list(records.decode_records(part.records)))

        if concurrent:  # 8 consumers at once: the first GET is awaited by all the others
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                counts = list(pool.map(one, range(8)))
        else:  # one after another: the file stays cached
            counts = [one(p) for p in range(8)]
        assert counts == [5] * 8
        assert reader.runtime.counters.get(GET) - before == 1


def test_files_too_big_for_the_cache_are_read_by_range(kafka_factory: Callable[..., Any]) -> None:
    with kafka_factory() as writer:
        write_one_wide_file(writer, "ranged", 8)
    # A cache of 4 KiB: the ~40 KiB file is more than a quarter of it, so each fetch GETs its own range
    # and nothing holds the whole file.
    with kafka_factory(cache_bytes=4096) as reader:
        before = reader.runtime.counters.get(GET)
        for p in range(3):
            with Wire(reader.port) as wire:
                (part,) = wire.call(fetch_request("ranged", [p]), FetchResponse).responses[0].partitions
                assert len(list(records.decode_records(part.records))) == 5
        assert reader.runtime.counters.get(GET) - before == 3
        assert reader.runtime.agent.cache.size <= 4096


def test_zstd_needs_produce_v7_and_fetch_v10_where_kafka_asks_it(broker: RunningBroker) -> None:
    """KIP-110 as Kafka's broker applies it: a zstd batch in Produce below v7 is refused; Fetch below v10
    of a topic whose compression.type is zstd gets UNSUPPORTED_COMPRESSION_TYPE; a topic that keeps each
    producer's codec is served as stored at every version, zstd batches included
    (``KafkaApis.maybeConvertFetchedData`` looks at the topic's config, not at the batches)."""
    from storage.records import compression

    create(broker, "z", 2)
    create(broker, "zt", 1, **{"compression.type": "zstd"})
    now = int(time.time() * 1000)
    zstd = records.encode_batch([records.Record(0, now, b"k", b"v" * 100)], codec=compression.ZSTD)
    with Wire(broker.port) as wire:
        old = wire.call(produce("z", {0: zstd}, version=6), ProduceResponse)
        assert partition_results(old) == {0: (errors.UNSUPPORTED_COMPRESSION_TYPE, -1)}
        assert broker.runtime.metadata.partition_state("z", 0).high_watermark == 0  # nothing stored
        new = wire.call(produce("z", {0: zstd, 1: batch([b"plain"])}, version=7), ProduceResponse, 2)
        assert partition_results(new) == {0: (0, 0), 1: (0, 0)}
        typed = wire.call(produce("zt", {0: batch([b"stored as zstd"])}, version=7), ProduceResponse, 3)
        assert partition_results(typed) == {0: (0, 0)}

        def fetch(topic: str, partitions: list[int], version: int) -> dict[int, tuple[int, int]]:
            response = wire.call(fetch_request(topic, partitions, version=version), FetchResponse, 4)
            return {
                p.partition_index: (p.error_code, len(p.records or b""))
                for p in response.responses[0].partitions
            }

        old_fetch = fetch("z", [0, 1], 9)
        assert all(code == 0 and size > 0 for code, size in old_fetch.values())  # served as stored
        assert fetch("zt", [0], 9) == {0: (errors.UNSUPPORTED_COMPRESSION_TYPE, 0)}
        assert all(code == 0 and size > 0 for code, size in fetch("z", [0, 1], 10).values())
        assert all(code == 0 and size > 0 for code, size in fetch("zt", [0], 10).values())


class HeldPuts(AsyncObjectStore):
    """PUTs wait until the test releases them (a thread-safe gate: the agent runs in its own thread)."""

    def __init__(self, inner: AsyncObjectStore) -> None:
        self.inner = inner
        self.counters = inner.counters
        self.url = inner.url
        self.release = threading.Event()

    async def put(self, key: str, data: bytes) -> None:
        await asyncio.to_thread(self.release.wait, 30)
        await self.inner.put(key, data)

    async def get(self, key: str) -> bytes:
        return await self.inner.get(key)

    async def get_range(self, key: str, start: int, end: int) -> bytes:
        return await self.inner.get_range(key, start, end)


def test_a_produce_not_committed_within_its_timeout_gets_request_timed_out(
    kafka_factory: Callable[..., Any], tmp_path: Any
) -> None:
    held = HeldPuts(LocalAsyncObjectStore(tmp_path / "held"))
    with kafka_factory(astore=held) as broker:
        create(broker, "slow")
        request = produce("slow", {0: batch([b"x"])})
        request.timeout_ms = 300
        with Wire(broker.port) as wire:
            started = time.monotonic()
            response = wire.call(request, ProduceResponse)
            assert partition_results(response) == {0: (errors.REQUEST_TIMED_OUT, -1)}
            assert time.monotonic() - started < 5
            held.release.set()  # the flush goes on: what timed out is the wait, not the write
            for _ in range(100):
                if broker.runtime.metadata.partition_state("slow", 0).high_watermark == 1:
                    break
                time.sleep(0.05)
            answer = wire.call(produce("slow", {0: batch([b"y"])}), ProduceResponse, 2)
            assert partition_results(answer) == {0: (0, 1)}


def test_a_catch_up_fetch_reads_the_oldest_files_first_and_each_file_once(
    kafka_factory: Callable[..., Any],
) -> None:
    """Files are admitted oldest first, up to half the cache: a consumer's partitions move through the log
    together and every file is fetched once, however many partitions and fetches read it."""
    with kafka_factory() as writer:
        create(writer, "old", 4)
        with Wire(writer.port) as wire:
            for n in range(6):  # six flushes: six files, each with a chunk of every partition
                request = produce("old", {p: batch([b"%d" % n * 1000] * 5) for p in range(4)})
                assert all(
                    code == 0
                    for code, _ in partition_results(wire.call(request, ProduceResponse, n)).values()
                )
    # Files of ~20 KB; a 100 KB cache: half of it holds two of them.
    with kafka_factory(cache_bytes=100_000) as reader:
        before = reader.runtime.counters.get(GET)
        offsets = dict.fromkeys(range(4), 0)
        with Wire(reader.port) as wire:
            for call in range(20):
                if all(o == 30 for o in offsets.values()):
                    break
                request = fetch_request("old", dict(offsets))
                for part in wire.call(request, FetchResponse, call).responses[0].partitions:
                    got = [r.offset for r in records.decode_records(part.records)] if part.records else []
                    got = [o for o in got if o >= offsets[part.partition_index]]
                    if got:
                        assert got[0] == offsets[part.partition_index]
                        offsets[part.partition_index] = got[-1] + 1
                if call == 0:  # the first fetch read only the two oldest files, for every partition
                    assert offsets == dict.fromkeys(range(4), 10)
        assert offsets == dict.fromkeys(range(4), 30)
        assert reader.runtime.counters.get(GET) - before == 6  # one GET per file


def test_fetch_answers_share_one_byte_budget(kafka_factory: Callable[..., Any]) -> None:
    """STRATA_KAFKA_FETCH_BUFFER_BYTES bounds the bytes of Fetch answers held at once: a fetch reads no more
    than its grant (its first batch always whole), the rest comes in later fetches, and every grant is back
    once the answers are written."""
    with kafka_factory(kafka_fetch_buffer_bytes=12_000) as broker:
        write_one_wide_file(broker, "budget", 8)  # 8 partitions, one ~5 KB batch each
        with Wire(broker.port) as wire:
            parts = wire.call(fetch_request("budget", list(range(8))), FetchResponse).responses[0].partitions
        sizes = [len(p.records or b"") for p in parts]
        assert 0 < sum(sizes) <= 12_000
        assert sizes.count(0) >= 5  # the others wait for a later fetch
        assert broker.runtime.kafka is not None
        budget = broker.runtime.kafka.ctx.fetch_budget
        for _ in range(50):
            if budget.held == 0:
                break
            time.sleep(0.02)
        assert budget.held == 0


def test_a_long_polling_fetch_holds_no_fetch_budget_while_it_waits(broker: RunningBroker) -> None:
    import threading as _threading

    create(broker, "idle")
    assert broker.runtime.kafka is not None
    budget = broker.runtime.kafka.ctx.fetch_budget
    request = fetch_request("idle", [0])
    request.max_wait_ms = 2000  # nothing to read: the fetch waits the whole time
    done = _threading.Event()

    def poll() -> None:
        with Wire(broker.port) as wire:
            wire.call(request, FetchResponse)
        done.set()

    thread = _threading.Thread(target=poll)
    thread.start()
    time.sleep(0.5)
    assert not done.is_set()
    assert budget.held == 0
    thread.join(10)
    assert done.is_set()


def test_pipelined_fetches_on_one_connection_do_not_lock_the_fetch_budget(broker: RunningBroker) -> None:
    """Fetch A (an empty partition, long-polling 1 s) then Fetch B (a partition with a record), 50 MiB each
    (clients' default fetch.max.bytes) on one connection, then B again on a second connection. B's answer
    holds its grant until A's is written (answers go out in order); A must not wait for that grant forever
    when its long poll ends, so all three are answered and the budget is whole again."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("piped", num_partitions=2)])["piped"].result(10)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("piped", b"x", partition=1)
    assert producer.flush(10) == 0

    def fetch(partition: int, max_wait_ms: int) -> Any:
        topic = FetchRequest[11].FetchTopic
        return FetchRequest[11](
            replica_id=-1,
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            max_bytes=50 * 1024 * 1024,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            forgotten_topics_data=[],
            rack_id="",
            topics=[
                topic(
                    topic="piped",
                    partitions=[
                        topic.FetchPartition(
                            partition=partition,
                            current_leader_epoch=-1,
                            fetch_offset=0,
                            log_start_offset=-1,
                            partition_max_bytes=60 * 1024 * 1024,
                        )
                    ],
                )
            ],
        )

    with Wire(broker.port, timeout=10) as one, Wire(broker.port, timeout=10) as two:
        one.send(Wire.frame(fetch(0, 1000), 1), Wire.frame(fetch(1, 0), 2))
        time.sleep(0.3)
        two.send(Wire.frame(fetch(1, 0), 3))
        a = Wire.decode(one.recv_frame(), FetchResponse, 11, 1)
        b = Wire.decode(one.recv_frame(), FetchResponse, 11, 2)
        c = Wire.decode(two.recv_frame(), FetchResponse, 11, 3)
        # C waited for room no longer than a moment (its max_wait is 0): an answer without records, but
        # with the partition's offsets; asked again once A and B are written, it gets the record.
        assert c.responses[0].partitions[0].high_watermark == 1
        again = two.call(fetch(1, 0), FetchResponse, correlation_id=4)
    assert a.responses[0].partitions[0].high_watermark == 0
    assert b.responses[0].partitions[0].records
    assert again.responses[0].partitions[0].records
    budget = broker.runtime.kafka.ctx.fetch_budget if broker.runtime.kafka else None
    assert budget is not None
    deadline = time.time() + 5
    while budget.held and time.time() < deadline:
        time.sleep(0.05)
    assert budget.held == 0


def test_produce_answers_carry_the_partitions_log_start_offset(broker: RunningBroker) -> None:
    # Kafka's Produce answer (v5+) says where the partition's log starts, as the append saw it: the Java
    # producer reads it to tell a producer lost to retention from a broken sequence.
    create(broker, "starts")
    with Wire(broker.port) as wire:

        def log_start(correlation_id: int) -> int:
            response = wire.call(
                produce("starts", {0: batch([b"a", b"b", b"c"])}), ProduceResponse, correlation_id
            )
            ((partition,),) = [t.partition_responses for t in response.responses]
            assert partition.error_code == errors.NONE
            return int(partition.log_start_offset)

        assert log_start(1) == 0
        broker.runtime.metadata.apply_retention("starts", 0, 2, 0)  # as DeleteRecords to offset 2
        assert log_start(2) == 2
