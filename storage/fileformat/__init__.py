"""The multi-partition file: one object per flush, holding one chunk per topic-partition. Sans-IO.

Layout of a whole object (all integers big-endian)::

    +----------------+----------------+-----+--------------------+---------+------------------+
    | chunk 0 bytes  | chunk 1 bytes  | ... | chunk n-1 bytes    | footer  | trailer (16 B)   |
    +----------------+----------------+-----+--------------------+---------+------------------+
    0                                                            F         F + footer_length

A chunk is a concatenation of Kafka RecordBatch v2 (see ``storage/records/``); this module treats it as
opaque bytes. Chunks are contiguous, start at byte 0, and are **sorted by (topic, partition)**, so several
files can be merged with forward-only streams. A flush writes each topic-partition once; a compaction
output may hold several chunks of one partition (runs of the log that other files separate), in increasing
offset order. Topics compare by Unicode
code point, which is also the byte order of their utf-8 encoding. Batch base offsets inside a
chunk are relative to the chunk (its first batch starts at 0); the chunk's absolute base offset lives only in
the metadata store, which assigns it at commit.

Footer (``footer_length`` bytes, covered by ``footer_crc``)::

    chunk_count        u32
    chunk_count times:
      topic_length       u16      then topic, utf-8, 1..65535 bytes
      partition          u32
      position           u64      byte offset of the chunk in the object
      length             u32      bytes of the chunk
      record_count       u32      records in the chunk, >= 1
      last_offset_delta  u32      relative offset of the chunk's last record (0 = its base offset)
      min_timestamp      i64
      max_timestamp      i64
      crc                u32      CRC-32C of the chunk's bytes
      flags              u8       bit 0: a bitmap of present offsets follows; other bits must be 0
      [bitmap_length     u32      only if flags bit 0; then bitmap_length bytes of a portable-format
                                  roaring bitmap (pyroaring ``BitMap.serialize()``) of the relative
                                  offsets present]

Without a bitmap the chunk is dense: every relative offset 0..last_offset_delta holds a record, so
``record_count == last_offset_delta + 1``. Compaction output with holes carries the bitmap; its cardinality is
``record_count`` and its maximum is ``last_offset_delta``.

Trailer, fixed ``TRAILER_SIZE`` = 16 bytes at the very end::

    footer_length  u32
    footer_crc     u32      CRC-32C of the footer bytes
    version        u16      FORMAT_VERSION (1)
    magic          6 bytes  b"STRATA"

A reader fetches the last 16 bytes, then the footer range (:func:`footer_span`), then only the chunk ranges it
needs, each checked against its footer CRC (:func:`verify_chunk`). The trailer's magic and version are checked
exactly; a damaged ``footer_length`` or ``footer_crc`` makes the footer fail its CRC, so every corruption of
footer or trailer surfaces as :class:`~storage.errors.CodecError`.

What a crash leaves behind: a file is written by exactly one PUT, and object stores make a PUT all or nothing,
so an object is either complete or absent; there is no partially written file to repair. A file that was
uploaded but whose metadata commit never happened (the writer crashed in between) is referenced by no chunk
row: it is an orphan, and garbage collection deletes it after its grace period. Readers only open objects
the metadata store references.

The format's pieces: ``layout.py`` (the constants and a chunk's footer entry, ``ChunkMeta``), ``writer.py``
(``FileBuilder``) and ``reader.py`` (trailer, footer and chunk checks). Callers import from here.
"""

from __future__ import annotations

from storage.fileformat.layout import FORMAT_VERSION, MAGIC, TRAILER_SIZE, ChunkMeta
from storage.fileformat.reader import footer_span, parse_footer, parse_trailer, read_index, verify_chunk
from storage.fileformat.writer import FileBuilder

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "TRAILER_SIZE",
    "ChunkMeta",
    "FileBuilder",
    "footer_span",
    "parse_footer",
    "parse_trailer",
    "read_index",
    "verify_chunk",
]
