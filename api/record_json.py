"""HTTP fetch answers rendered as JSON straight from the stored batches (the C loop of ``api/_recordjson.c``).

``render_records`` writes the ``records`` array of a fetch answer and gives its ``next_offset`` by the rules
of ``agents.chunks.decode_fetch`` (first existing offset >= the fetch offset, whole records up to
``max_bytes``, at least one; past removed offsets at the end of a chunk), rendered as
``api.models.record_out`` renders them. It is a fast path: whenever it meets anything but plainly valid
bytes (a chunk or batch CRC, a malformed record, a key or value that is not UTF-8 text for ``utf8``, a
value beyond 64 bits) it returns None, and the caller answers through ``decode_fetch`` and
``record_out``, which raise the precise error (``CorruptObject``, ``NotAcceptable``). Like
``decode_fetch``, it checks every record of each chunk it reads, also those past the answer's cut.

Why C: see the top of ``api/_recordjson.c`` (a Python object per record was most of an HTTP fetch's CPU).
"""

from __future__ import annotations

from collections.abc import Callable

from agents.chunks import ChunksResult, verify
from api._recordjson import render_batch, render_run
from storage import records
from storage.errors import CodecError, CorruptObject

# (records, next offset or -1, size so far, nonempty, stopped, position after): what a step answers.
Rendered = tuple[int, int, int, bool, bool, int]


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
            # Runs of uncompressed batches are read in C; a compressed batch where a run stops is
            # decompressed here. A run at a compressed batch returns at once, so the steps alternate.
            step: Callable[..., Rendered | None] = render_run
            pos = 0
            while True:
                rendered = step(
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
                if pos >= len(data):
                    break
                step = _compressed_batch if step is render_run else render_run
        except (CodecError, CorruptObject):
            return None
        if stopped:
            out += b"]"
            return count, next_offset
        # Offsets up to the chunk's last offset are consumed even if compaction removed them.
        next_offset = max(next_offset, chunk.last_offset + 1)
    if not result.chunks:
        next_offset = max(offset, result.end)
    out += b"]"
    return count, next_offset


def _compressed_batch(
    out: bytearray,
    data: memoryview,
    pos: int,
    offset_base: int,
    start_offset: int,
    base64: bool,
    size: int,
    max_bytes: int,
    nonempty: bool,
) -> Rendered | None:
    """``render_run``'s answer for the one (compressed) batch at ``pos``: decompressed by the codec module,
    rendered by ``render_batch``. ``CodecError`` for a batch ``read_header`` refuses."""
    header, args = records.batch_for_c(data, pos, offset_base)
    rendered = render_batch(out, *args, start_offset, base64, size, max_bytes, nonempty)
    return None if rendered is None else (*rendered, pos + header.size)
