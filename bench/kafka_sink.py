"""A bare asyncio Kafka sink: the ceiling for bench.kafka_bench's produce throughput, and with ``--durable``
for bench.round_trip_bench's durable round trip.

    python -m bench.kafka_sink --port P [--host 127.0.0.1] [--partitions 32] [--max-seconds 1800]
                               [--durable log|files|files+commit --dir D] [--raw]

It does what Strata's Kafka door does to a Produce request up to the point where Strata would buffer the
batches, and nothing after: frames are read the same way (4-byte size, then the frame), decoded with
``broker.codec.decode`` (kafka-python's protocol classes), and every partition's records are walked with
``storage.records.iter_batches(verify_crc=True)`` (magic, lengths, CRC-32C of each batch). By default the
answer goes out at once, with fake offsets counted per partition; nothing is stored and nothing waits.

It answers four APIs, enough for a librdkafka producer, idempotent or not:
- ApiVersions, with ``broker.apis.api_versions_response`` (the table Strata advertises);
- Metadata: itself as the only broker (node 0, leader epoch -1) and every topic asked for with
  ``--partitions`` partitions (every topic it has seen if the request names none);
- InitProducerId: a new producer id per request, epoch 0 (an idempotent producer asks once);
- Produce: per partition, the offset of its first record, or UNSUPPORTED_COMPRESSION_TYPE /
  CORRUPT_MESSAGE when ``iter_batches`` refuses the batches (compressed batches, until compression lands).
Any other request closes the connection. acks=0 gets no response, as in Strata.

``--durable MODE --dir D``: a Produce is answered only once its accepted batches are durable on the
local disk (bench/durable_log.py: group commit, one ``writev`` and ``fdatasync`` per round to one log file,
or one new file per round as Strata's local store writes a flush). The connection keeps reading while
answers wait, and answers go out in request order. The figure is the disk's share of a durable round trip
with nothing else around it: no metadata commit, no buffer, no flush policy. ``--raw`` reads requests with
``struct`` instead (bench/sink_raw.py: no protocol classes, no CRC check), so that the sink's own CPU is as
small as Python allows.

Binds the given host only (127.0.0.1 by default), serves on one uvloop event loop (as ``strata serve``
does) until SIGTERM, SIGINT or ``--max-seconds``, then prints one JSON line of totals on stdout (requests,
batches, records, record bytes, refused partitions, and per topic the codecs of the batches it got: whether
the client compressed at all), which the benchmark reads from its log.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import uvloop
from kafka.protocol.metadata.metadata import MetadataResponse
from kafka.protocol.producer.produce import ProduceResponse
from kafka.protocol.producer.transaction import InitProducerIdResponse

from bench.durable_log import MODES, GroupCommit, Piece
from bench.sink_raw import RawConnection, RawSink
from broker import apis, codec, errors, frames
from storage import records
from storage.errors import BadRequest, CodecError

METADATA = 3
INIT_PRODUCER_ID = 22
NODE_ID = 0
MAX_FRAME_BYTES = 100 * 1024 * 1024  # Strata's default kafka_max_request_bytes
_COMPRESSION = 0x07
_ATTRIBUTES_AT = 21  # int16 attributes, after baseOffset 8, batchLength 4, leaderEpoch 4, magic 1, crc 4
_MTopic = MetadataResponse.MetadataResponseTopic
_MPartition = _MTopic.MetadataResponsePartition
_PTopic = ProduceResponse.TopicProduceResponse
_PPartition = _PTopic.PartitionProduceResponse


class Sink:
    def __init__(self, host: str, port: int, partitions: int, durable: GroupCommit | None = None) -> None:
        self.host = host
        self.port = port
        self.partitions = partitions
        self.durable = durable
        self.next_producer_id = 1000
        self.topics: set[str] = set()
        self.next_offset: dict[tuple[str, int], int] = {}
        self.totals = {"requests": 0, "produce": 0, "batches": 0, "records": 0, "bytes": 0, "refused": 0}

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answers: asyncio.Queue[tuple[asyncio.Future[None] | None, bytes] | None] = asyncio.Queue()
        sender = None if self.durable is None else asyncio.create_task(_send(answers, writer))
        try:
            while True:
                size = await frames.read_size(reader, MAX_FRAME_BYTES)
                if size is None:
                    return
                frame = await reader.readexactly(size)
                self.totals["requests"] += 1
                response, pieces = self.answer(frame)
                if response is None:
                    continue
                if sender is None:
                    writer.write(response)
                    # Answers are written in request order (one request at a time); wait for the socket
                    # only when the client does not read, as Strata's sender does.
                    await writer.drain()
                else:
                    assert self.durable is not None
                    answers.put_nowait((self.durable.append(pieces) if pieces else None, response))
        except (BadRequest, ConnectionError, asyncio.IncompleteReadError) as exc:
            print(f"closing a connection: {exc}", file=sys.stderr, flush=True)
        finally:
            if sender is not None:
                answers.put_nowait(None)
                await sender
            writer.close()

    def answer(self, frame: bytes) -> tuple[bytes | None, list[Piece]]:
        """The framed answer (None for acks=0), and the accepted batches a durable sink must write first."""
        decoded = codec.decode(frame)
        if isinstance(decoded, codec.UnsupportedApiVersions):
            body: bytes = apis.api_versions_response(0, errors.UNSUPPORTED_VERSION).encode()
            return frames.frame(decoded.correlation_id, False, body), []
        key, version, request = decoded.api.key, decoded.peek.api_version, decoded.request
        response: Any
        pieces: list[Piece] = []
        if key == apis.API_VERSIONS:
            response = apis.api_versions_response(version, errors.NONE)
        elif key == METADATA:
            response = self.metadata(version, request)
        elif key == INIT_PRODUCER_ID:
            self.next_producer_id += 1
            response = InitProducerIdResponse[version](
                throttle_time_ms=0, error_code=0, producer_id=self.next_producer_id, producer_epoch=0
            )
        elif key == apis.PRODUCE:
            response = self.produce(version, request, pieces)
            if response is None:
                return None, []
        else:
            raise BadRequest(f"the sink does not serve API {key}")
        response.with_header(correlation_id=decoded.peek.correlation_id)
        encoded: bytes = response.encode(header=True, framed=True)
        return encoded, pieces

    def metadata(self, version: int, request: Any) -> Any:
        if request.topics is None or (version == 0 and not request.topics):
            names = sorted(self.topics)
        else:
            names = [t.name for t in request.topics]
            self.topics.update(names)
        topics = [
            _MTopic(
                error_code=0,
                name=name,
                topic_id=uuid.uuid5(uuid.NAMESPACE_URL, "strata-sink/" + name),
                is_internal=False,
                partitions=[
                    _MPartition(
                        error_code=0,
                        partition_index=p,
                        leader_id=NODE_ID,
                        leader_epoch=-1,
                        replica_nodes=[NODE_ID],
                        isr_nodes=[NODE_ID],
                        offline_replicas=[],
                    )
                    for p in range(self.partitions)
                ],
            )
            for name in names
        ]
        broker = MetadataResponse.MetadataResponseBroker(
            node_id=NODE_ID, host=self.host, port=self.port, rack=None
        )
        return MetadataResponse[version](
            throttle_time_ms=0,
            brokers=[broker],
            cluster_id="strata-kafka-sink",
            controller_id=NODE_ID,
            topics=topics,
        )

    def produce(self, version: int, request: Any, pieces: list[Piece]) -> Any:
        """The answer; every accepted partition's records are added to ``pieces``."""
        self.totals["produce"] += 1
        topics = []
        for topic_data in request.topic_data:
            parts = []
            for pdata in topic_data.partition_data:
                code, base = self.accept(topic_data.name, pdata.index, pdata.records)
                if code == errors.NONE:
                    pieces.append(pdata.records)
                parts.append(
                    _PPartition(
                        index=pdata.index,
                        error_code=code,
                        base_offset=base,
                        log_append_time_ms=-1,
                        log_start_offset=-1,
                        record_errors=[],
                        error_message=None,
                    )
                )
            topics.append(_PTopic(name=topic_data.name, partition_responses=parts))
        if request.acks == 0:
            return None
        return ProduceResponse[version](responses=topics, throttle_time_ms=0)

    def accept(self, topic: str, partition: int, data: Any) -> tuple[int, int]:
        """(error code, base offset) for one partition's records."""
        if not 0 <= partition < self.partitions:
            self.totals["refused"] += 1
            return errors.UNKNOWN_TOPIC_OR_PARTITION, -1
        data = data if data is not None else b""  # a view into the request frame
        if len(data) > _ATTRIBUTES_AT + 1:
            # The first batch's codec: says whether the client compressed at all (librdkafka sends lz4
            # uncompressed to a broker that does not advertise FindCoordinator).
            codec = f"{topic} codec {data[_ATTRIBUTES_AT + 1] & _COMPRESSION}"
            self.totals[codec] = self.totals.get(codec, 0) + 1
        count = nbytes = nbatches = 0
        try:
            for header, view in records.iter_batches(data, verify_crc=True):
                count += header.records_count
                nbytes += len(view)
                nbatches += 1
        except CodecError:
            self.totals["refused"] += 1
            compressed = len(data) > _ATTRIBUTES_AT + 1 and data[_ATTRIBUTES_AT + 1] & _COMPRESSION
            # Not retriable for librdkafka, so a refused codec fails fast instead of retrying until timeout.
            return (errors.UNSUPPORTED_COMPRESSION_TYPE if compressed else errors.CORRUPT_MESSAGE), -1
        if nbatches == 0:
            self.totals["refused"] += 1
            return errors.CORRUPT_MESSAGE, -1
        key = (topic, partition)
        base = self.next_offset.get(key, 0)
        self.next_offset[key] = base + count
        self.totals["batches"] += nbatches
        self.totals["records"] += count
        self.totals["bytes"] += nbytes
        return errors.NONE, base


async def _send(
    answers: asyncio.Queue[tuple[asyncio.Future[None] | None, bytes] | None], writer: asyncio.StreamWriter
) -> None:
    """A durable sink's answers, in request order, each once its batches are on disk."""
    while (item := await answers.get()) is not None:
        durable, response = item
        if durable is not None:
            await durable
        writer.write(response)
        await writer.drain()


async def main(args: argparse.Namespace) -> None:
    if (args.durable is None) != (args.dir is None):
        raise SystemExit("--durable and --dir go together")
    durable = None if args.durable is None else GroupCommit(Path(args.dir), args.durable)
    sink = Sink(args.host, args.port, args.partitions, durable)
    loop = asyncio.get_running_loop()
    if args.raw:
        raw = RawSink(args.host, args.port, args.partitions)
        server = await loop.create_server(lambda: RawConnection(raw, durable), args.host, args.port)
    else:
        server = await asyncio.start_server(sink.serve, args.host, args.port)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"kafka sink on {args.host}:{args.port}", file=sys.stderr, flush=True)
    try:
        await asyncio.wait_for(stop.wait(), args.max_seconds)
    except TimeoutError:
        pass
    server.close()
    totals: dict[str, Any] = dict(sink.totals)
    if durable is not None:
        durable.close()
        totals["durable"] = durable.totals
    print(json.dumps({"sink_totals": totals}), flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--max-seconds", type=float, default=1800.0)
    parser.add_argument("--durable", choices=MODES, help="answer a Produce once its batches are on disk")
    parser.add_argument("--dir", help="where --durable writes")
    parser.add_argument("--raw", action="store_true", help="read requests with struct (bench/sink_raw.py)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    uvloop.run(main(parse_args()))
