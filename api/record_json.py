"""HTTP fetch answers rendered as JSON straight from the stored batches (the C loop of ``api/_recordjson.c``).

``render_records`` writes the ``records`` array of a fetch answer and gives its ``next_offset`` by the rules
of ``agents.fetch.decode_fetch`` (first existing offset >= the fetch offset, whole records up to
``max_bytes``, at least one; past removed offsets at the end of a chunk), rendered as
``api.models.record_out`` renders them. It is a fast path: whenever it meets anything but plainly valid
bytes (a chunk or batch CRC, a malformed record, a key or value that is not UTF-8 text for ``utf8``, a
value beyond 64 bits) it returns None, and the caller answers through ``decode_fetch`` and
``record_out``, which raise the precise error (``CorruptObject``, ``NotAcceptable``). Like
``decode_fetch``, it checks every record of each chunk it reads, also those past the answer's cut.

Why C: see the top of ``api/_recordjson.c`` (a Python object per record was most of an HTTP fetch's CPU).
"""

from __future__ import annotations

from agents.fetch import ChunksResult, verify
from api._recordjson import render_batch, render_run
from storage import records
from storage.errors import CodecError, CorruptObject


def render_records(result: ChunksResult, base64: bool, out: bytearray) -> tuple[int, int] | None:
    """Append the JSON array of the answer's records to ``out``; (how many, next_offset), or None: use
    the reference path (``out`` then holds part of an answer and must be dropped)."""
    count = size = 0
    max_bytes = result.max_bytes
    nonempty = False
    offset = result.offset
    next_offset = offset
    out += b"["
    for chunk, data in result.chunks:
        stopped = False
        try:
            verify(chunk, data)
            pos, end = 0, len(data)
            while True:
                # Uncompressed batches, read in C up to the end or the next compressed batch ...
                rendered = render_run(
                    out,
                    data,
                    pos,
                    chunk.base_offset,
                    offset,
                    base64,
                    size,
                    -1 if stopped else max_bytes,
                    nonempty,
                )
                if rendered is None:
                    return None
                n, after, size, nonempty, stop, pos = rendered
                count += n
                if after >= 0:
                    next_offset = after
                stopped = stopped or stop
                if pos >= end:
                    break
                # ... and a compressed one, decompressed here.
                header, args = records.batch_for_c(data, pos, chunk.base_offset)
                rendered_batch = render_batch(
                    out, *args, offset, base64, size, -1 if stopped else max_bytes, nonempty
                )
                if rendered_batch is None:
                    return None
                n, after, size, nonempty, stop = rendered_batch
                count += n
                if after >= 0:
                    next_offset = after
                stopped = stopped or stop
                pos += header.size
        except (CodecError, CorruptObject):
            return None
        if stopped:
            out += b"]"
            return count, next_offset
        # Offsets up to the chunk's last offset are consumed even if compaction removed them.
        next_offset = max(next_offset, chunk.last_offset + 1)
    if not result.chunks:
        next_offset = max(offset, result.high_watermark)
    out += b"]"
    return count, next_offset
