"""The flush file's layout, built while its requests arrive: chunks, pieces, relative offsets and CRCs.

A flush file (storage/fileformat/) holds one chunk per topic-partition, each the concatenation of its
requests' batches in arrival order, with every batch's baseOffset set to its first record's offset
relative to the chunk (the metadata commit gives the chunk its absolute base). Everything about a
chunk but its position in the file is known as soon as its batches are: so ``FileLayout.add`` places each
request's batches as the request enters the buffer (agents/buffer.py), and cutting a flush only sorts the
chunks and writes the footer. Laying out a flush of thousands of small Kafka requests at the cut held
the event loop for milliseconds, all of it added to the acknowledgement latency of every request in the
flush; spread over the flush interval in which the requests arrive, it is not.

No batch is copied or written to. A batch's baseOffset (its first 8 bytes, outside its CRC) is given as a
new 8-byte piece, followed by a view of the batch's bytes after it: the file is a list of pieces, which a
store writes as they are (the local directory: ``os.writev``) or joins once (S3).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agents import _layout
from agents._layout import OpenChunk
from storage import fileformat
from storage.metadata.rows import NewChunk, ProducerBatch
from storage.objectstore.base import Piece

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class PartitionBatch:
    """One request's records for one partition, encoded as a single RecordBatch (relative base 0).

    An idempotent Kafka producer's batch carries its header's producer id, epoch and base sequence, which
    the flush commit checks (storage/metadata/sql/producers.py); every other batch (HTTP's included) has
    producer id -1 and skips those checks.
    """

    topic: str
    partition: int
    # The batch as its producer sent it (a view into a Kafka request frame) or as HTTP encoded it; never
    # written to.
    data: bytes | memoryview
    record_count: int
    min_timestamp: int
    max_timestamp: int
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    # A transactional producer's batch (attributes bit 4): the commit checks it against the transaction.
    transactional: bool = False


@dataclass(slots=True)
class BuiltFile:
    # The file as its pieces (fileformat.FileBuilder.finish_pieces): not joined.
    pieces: list[Piece]
    size: int
    chunks: list[NewChunk]
    tps: list[TopicPartition]
    # starts[r][b]: the relative offset, within its chunk, of request r's batch b's first record.
    starts: list[list[int]]
    # offsets[r][b]: where request r's batch b starts, in bytes from the start of its chunk.
    offsets: list[list[int]]
    # The chunk index of each topic-partition (positions in ``tps``), built once per file.
    index_of: dict[TopicPartition, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index_of = {tp: i for i, tp in enumerate(self.tps)}

    def spans(self, requests: list[list[PartitionBatch]]) -> list[list[tuple[int, int]]]:
        """Per request (the file's, in order, as their batches): (chunk index, relative offset in the chunk
        of its first record) of each batch: per batch, never per record (agents/offsets.py). One loop over
        the file's requests: it runs once per flush for every request in it."""
        index_of = self.index_of
        out = []
        for batches, starts in zip(requests, self.starts, strict=True):
            if len(batches) == 1:  # a Kafka request's partition, mostly: no comprehension
                batch = batches[0]
                out.append([(index_of[(batch.topic, batch.partition)], starts[0])])
            else:
                out.append([(index_of[(b.topic, b.partition)], starts[i]) for i, b in enumerate(batches)])
        return out

    def rebase(self, requests: list[list[PartitionBatch]], body: bytes) -> None:
        """Point every batch of the file's requests at its copy in ``body``, the file joined into one buffer,
        so that the buffers the batches came in (Kafka request frames) are freed now rather than when the
        flush ends: while a remote store uploads, the file's bytes then exist once, not twice. The copy's
        baseOffset is the relative one; nothing reads it (a file laid out again writes its own)."""
        view = memoryview(body)
        chunks, index_of = self.chunks, self.index_of
        for r, batches in enumerate(requests):
            offsets = self.offsets[r]
            for b, batch in enumerate(batches):
                start = chunks[index_of[(batch.topic, batch.partition)]].position + offsets[b]
                batch.data = view[start : start + len(batch.data)]
        self.pieces = [body]

    def producer_batches(self, requests: list[list[PartitionBatch]]) -> list[ProducerBatch]:
        """The idempotent producers' batches of the file's requests (their batches, in file order), each
        request one append."""
        index_of = self.index_of
        return [
            ProducerBatch(
                append=r,
                chunk=index_of[(batch.topic, batch.partition)],
                relative=self.starts[r][b],
                record_count=batch.record_count,
                producer_id=batch.producer_id,
                epoch=batch.producer_epoch,
                first_seq=batch.base_sequence,
                transactional=batch.transactional,
            )
            for r, batches in enumerate(requests)
            for b, batch in enumerate(batches)
            if batch.producer_id >= 0
        ]


class FileLayout:
    """A flush file being laid out, one request at a time, in the order the requests entered the buffer."""

    def __init__(self) -> None:
        self._chunks: dict[TopicPartition, OpenChunk] = {}
        self._starts: list[list[int]] = []
        self._offsets: list[list[int]] = []

    def add(self, batches: list[PartitionBatch]) -> None:
        """Place one request's batches (request index: the number of requests added before it): each is
        appended to its topic-partition's chunk as an 8-byte relative baseOffset and a view of the rest,
        and the chunk's count, length, timestamps and running CRC-32C follow (agents/_layout.c)."""
        _layout.add(self._chunks, batches, self._starts, self._offsets)

    def finish(self) -> BuiltFile:
        """The whole file: chunks sorted by (topic, partition), then the footer. At least one request.

        The layout is used up: it lets go of its pieces, which the file now holds."""
        builder = fileformat.FileBuilder()
        chunks: list[NewChunk] = []
        open_chunks, self._chunks = self._chunks, {}
        tps = sorted(open_chunks)
        for tp in tps:
            chunk = open_chunks[tp]
            meta = builder.add_chunk_pieces(
                tp[0],
                tp[1],
                chunk.pieces,
                record_count=chunk.count,
                last_offset_delta=chunk.count - 1,
                min_timestamp=chunk.min_ts,
                max_timestamp=chunk.max_ts,
                length=chunk.length,
                crc=chunk.crc,
            )
            chunks.append(
                NewChunk(
                    topic=tp[0],
                    partition=tp[1],
                    record_count=chunk.count,
                    position=meta.position,
                    length=meta.length,
                    min_timestamp=chunk.min_ts,
                    max_timestamp=chunk.max_ts,
                    crc=meta.crc,
                )
            )
        pieces = builder.finish_pieces()
        return BuiltFile(pieces, builder.object_size, chunks, tps, self._starts, self._offsets)


def build_file(requests: list[list[PartitionBatch]]) -> BuiltFile:
    """Lay out one file holding ``requests``' batches (each request's, in request order) at once."""
    layout = FileLayout()
    for batches in requests:
        layout.add(batches)
    return layout.finish()
