"""A compaction job's outputs: the chunks pass 2 builds, packed into files under the size cap, each file
uploaded with one PUT.

A ``Piece`` is one output chunk being built, records of one run of input chunks from offset ``base`` on,
kept byte for byte at their original offsets. ``OutputFiles`` turns pieces into chunks of open files, one
open file for compacted topics and one for the rest (their files are planned apart), and seals a file when
it reaches ``max_output_file_bytes``, or before a chunk that would take it past. A sealed file is an orphan
until the job's commit names it (``commit_compaction``); orphan GC collects it otherwise.

Offsets: a chunk spans [base, last]. A dense piece (a plain merge of gap-free input) ends where its input
ends; any other ends at its last kept record, so removed records after it become a gap between chunks. A
piece with holes carries the roaring bitmap of the relative offsets it holds, which the file's footer
stores (storage/fileformat/).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from pyroaring import BitMap

from planner.phases import PhaseHook
from planner.stats import JobStats
from storage import fileformat
from storage.clock import Clock
from storage.keys import new_object_key
from storage.metadata.rows import CompactionOutput, NewCompactedChunk, NewFile
from storage.objectstore.base import ObjectStore
from storage.topic_config import TopicConfig


@dataclass
class Piece:
    """One output chunk being built: records of a run from offset ``base`` on."""

    base: int
    buf: bytearray = field(default_factory=bytearray)
    present: BitMap = field(default_factory=BitMap)  # relative offsets kept
    count: int = 0
    min_ts: int = 2**63 - 1
    max_ts: int = -(2**63)


@dataclass
class _Output:
    """One output file being built; sealed (uploaded) when it reaches the size limit."""

    builder: fileformat.FileBuilder = field(default_factory=fileformat.FileBuilder)
    chunks: list[NewCompactedChunk] = field(default_factory=list)


class OutputFiles:
    """The output files of one job attempt; ``outputs`` lists the sealed ones, for the commit."""

    def __init__(
        self,
        store: ObjectStore,
        clock: Clock,
        rng: random.Random,
        level: int,
        max_file_bytes: int,
        stats: JobStats,
        on_phase: PhaseHook,
    ) -> None:
        self.store = store
        self.clock = clock
        self.rng = rng
        self.level = level
        self.cap = max_file_bytes
        self.stats = stats
        self.on_phase = on_phase
        self.outputs: list[CompactionOutput] = []
        self._open: dict[bool, _Output] = {}

    def emit(
        self, topic: str, partition: int, piece: Piece, last: int, dense: bool, config: TopicConfig | None
    ) -> None:
        """Add one output chunk spanning [piece.base, last] (none if every record was removed)."""
        self.stats.records_out += piece.count
        self.stats.count_out(topic, piece.count, len(piece.buf))
        if piece.count == 0:
            return  # every record of the span was removed: its offsets become a gap between chunks
        if not dense:
            # A chunk ends at its last record (the file format requires it): removed records after it
            # become a gap between chunks, like a wholly removed span.
            last = piece.base + piece.present.max()
        compacted = config is not None and config.compacted
        output = self._open.get(compacted)
        if output is None:
            output = self._open[compacted] = _Output()
        holes = not dense and len(piece.present) < last - piece.base + 1
        cap = self.cap
        added = len(piece.buf) + output.builder.entry_size(topic, piece.present if holes else None)
        if output.chunks and output.builder.object_size_now + added > cap:
            # Sealed before the chunk that would take it past the cap: an output file exceeds
            # compaction_file_bytes only when one chunk alone does. Agents read files up to a quarter of
            # their cache whole, once for every partition (agents/fetch.py), so a cap set there holds.
            with self.on_phase("seal"):
                self.seal(compacted)
            output = self._open[compacted] = _Output()
        meta = output.builder.add_chunk(
            topic,
            partition,
            piece.buf,
            record_count=piece.count,
            last_offset_delta=last - piece.base,
            min_timestamp=piece.min_ts,
            max_timestamp=piece.max_ts,
            present=piece.present if holes else None,
        )
        output.chunks.append(
            NewCompactedChunk(
                topic=topic,
                partition=partition,
                base_offset=piece.base,
                last_offset=last,
                record_count=piece.count,
                position=meta.position,
                length=meta.length,
                min_timestamp=piece.min_ts,
                max_timestamp=piece.max_ts,
                crc=meta.crc,
                has_holes=holes,
            )
        )
        if output.builder.object_size_now >= cap:
            with self.on_phase("seal"):
                self.seal(compacted)

    def seal(self, compacted: bool) -> None:
        """Upload one output file (one PUT). It stays an orphan unless the job's commit succeeds."""
        output = self._open.pop(compacted, None)
        if output is None or not output.chunks:
            return
        data = output.builder.finish()
        key = new_object_key(self.level, self.clock, self.rng)
        self.store.put(key, data)
        self.stats.puts += 1
        self.stats.bytes_written += len(data)
        self.stats.output_files += 1
        self.outputs.append(
            CompactionOutput(NewFile(key, len(data), self.level, self.clock.now_ms()), output.chunks)
        )

    def seal_all(self) -> None:
        """Upload every file still open (the job's last outputs)."""
        for compacted in sorted(self._open):
            with self.on_phase("seal"):
                self.seal(compacted)
