"""Kafka's four record-batch codecs, sans-IO: the records section of a compressed batch in, bytes out.

A batch's codec is ``attributes & 0x07``: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (5-7 are undefined and
refused). What each codec's stream looks like, as Kafka's clients write it:

- **gzip** (1): one gzip member (RFC 1952). Java's ``GZIPInputStream`` also reads several concatenated
  members, so this does too.
- **snappy** (2): two framings in the wild. librdkafka writes *raw* snappy (one block: a varint of the
  uncompressed length, then the compressed stream). Java (and kafka-python) write the *xerial* framing::

      offset  size  field
           0     8  magic            b"\\x82SNAPPY\\x00"
           8     4  version          int32 big-endian, 1
          12     4  compatible       int32 big-endian, 1
          16     .  blocks           [length int32 big-endian, raw snappy block of that many bytes] ...

  Readers tell them apart by the magic, as librdkafka and aiokafka do (``_detect_xerial_stream``). No
  valid raw stream starts with it: after the preamble ``\\x82 S``, its first element would be ``N``, a
  copy tag, and a raw stream must start with a literal.
  Strata writes the xerial framing with 32 KiB blocks (what Java writes; every Kafka client reads it).
- **lz4** (3): the LZ4 *frame* format (KIP-57), independent blocks, no content checksum (Kafka's Java
  reader rejects linked blocks).
- **zstd** (4): zstd frames. Streaming writers (librdkafka, Java's ``ZstdOutputStream``) may leave out the
  frame content size, so the decompressor must not need it.

Why cramjam plus zlib: cramjam (one Rust wheel, MIT) covers snappy raw blocks, lz4 frames and zstd, and its
zstd reads frames without a content size, where ``zstandard.ZstdDecompressor().decompress`` fails; aiokafka
uses it, and python-snappy 0.7 is a shim over it. It decompresses at the speed of the single-codec
libraries. gzip uses the standard library's zlib, which decompresses gzip faster than cramjam and bounds
its output natively (``max_length``).

Decompression is bounded: every call takes ``limit``, the most bytes it may produce, and a stream that
would produce more raises :class:`~storage.errors.CodecError` before more than ``limit`` + 1 bytes exist,
so a decompression bomb costs at most ``limit`` bytes of memory, never an out-of-memory. How the bound is
enforced, per codec: zlib's ``max_length``; snappy's length preamble (raw blocks declare their size before
any byte is produced); cramjam's ``decompress_into`` for lz4 and zstd, into a ``limit + 1`` byte anonymous
``mmap``, whose pages the kernel maps only when written, so an ordinary batch touches only its own size (an
mmap, not a numpy array: an agent then loads no numpy, megabytes of resident set, for this alone).
:func:`output_limit` is the bound every reader uses (see there).

Every malformed stream (truncated, garbage, wrong codec, trailing bytes) raises ``CodecError`` and
nothing else.

**Levels** (KIP-390, Kafka 3.8). :func:`compress` takes a topic's ``compression.gzip.level``,
``compression.lz4.level`` or ``compression.zstd.level`` *as Kafka defines it* (``level=None``: the codec's
Kafka default) and maps it onto the library here as Kafka 4.4's broker maps it onto its own (checked against
a Kafka 4.4 broker, which stored the same bytes: ``tests/kafka/test_compression_levels.py``):

- **gzip**: -1 or 1-9, default -1. Java's ``Deflater`` and zlib share the meaning (-1 is zlib's default, 6),
  and the level goes to zlib as it is: the deflate stream is byte for byte the one Kafka writes (of the
  10-byte gzip header, Java writes XFL 0 and OS 255 where zlib writes its own).
- **lz4**: 1-17, default 9. Kafka's writer (``Lz4BlockOutputStream``) uses lz4's *fast* compressor for
  the default level 9 and lz4's HC compressor at the given level for every other level (lz4-java's
  ``highCompressor``; lz4 caps HC at 12, and its levels 1 and 2 are both "lz4mid"). cramjam writes lz4
  frames through lz4's frame API, where a level below 2 is the fast compressor and 2-12 are HC (lz4 1.10's
  rule, which tests/unit/test_compression_levels.py holds cramjam to). So Kafka's
  9 is cramjam's 0, Kafka's 1 and 2 are cramjam's 2, 3-8 and 10-12 are themselves, and 13-17 are 12: block
  for block, the frames carry the blocks Kafka writes (Kafka's frame header leaves out the block
  checksums cramjam adds, which every reader accepts). On JSON-like records HC takes about 2 (level 2)
  to 40 (level 12) times the fast compressor's CPU for output 10-26 % smaller
  (``bench/compression_levels_bench.py``); the default keeps the fast compressor, as Kafka does.
- **zstd**: -131072..22, default 3; negative levels are zstd's fast modes and 0 is zstd's default (3), the
  same in zstd-jni and cramjam, and the level goes to zstd as it is. Kafka streams zstd with no content
  size, and zstd tunes a level's parameters to a size it knows, so the bytes can differ from Kafka's while
  the level means the same.
- **snappy** has no level, in Kafka as here.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Callable

import cramjam

from storage.errors import CodecError

__all__ = [
    "CODEC_IDS",
    "CODEC_NAMES",
    "DEFAULT_LEVELS",
    "GZIP",
    "LEVEL_RANGES",
    "LZ4",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "compress",
    "decompress",
    "output_limit",
    "valid_level",
]

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS = {name: codec for codec, name in CODEC_NAMES.items()}

# The decompressed size every reader allows a batch: the larger of a floor and a multiple of the batch's
# compressed size. The floor (64 MiB) is 64 times Kafka's default max.message.bytes: real data compresses
# 2-10x with these codecs, so an ordinary batch is far below it. The ratio term keeps a topic whose
# max.message.bytes was raised usable with compressible data. The bound depends only on the batch itself,
# so the produce check and every reader (HTTP fetch, compaction, Spark executors) apply the same one
# without the topic's config: a batch accepted at produce is never refused by a reader for its size.
OUTPUT_LIMIT_FLOOR = 64 << 20
OUTPUT_LIMIT_RATIO = 16

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_SIZE = 16
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip header and trailer, not zlib's
_GZIP_STEP = 4 << 20
# Kafka's compression.*.level configs (KIP-390): default and valid range per codec, as Kafka 4.4 declares
# them (CompressionType.defaultLevel / levelValidator). gzip also takes -1, zlib's default (6).
DEFAULT_LEVELS = {GZIP: -1, LZ4: 9, ZSTD: 3}
LEVEL_RANGES = {GZIP: (1, 9), LZ4: (1, 17), ZSTD: (-131072, 22)}
# cramjam's lz4 levels (lz4's frame API): 0 and 1 are the fast compressor, 2 lz4mid, 3-12 HC; lz4 caps at 12.
_LZ4_FAST = 0
_LZ4_HC_MIN = 2
_LZ4_HC_MAX = 12

_Buffer = bytes | bytearray | memoryview


def output_limit(compressed_size: int) -> int:
    """The most bytes a batch's records section of ``compressed_size`` bytes may decompress to."""
    return max(OUTPUT_LIMIT_FLOOR, OUTPUT_LIMIT_RATIO * compressed_size)


def decompress(codec: int, data: _Buffer, limit: int) -> bytes:
    """The decompressed bytes of ``data``, at most ``limit`` of them; ``CodecError`` otherwise."""
    if codec == GZIP:
        return _gunzip(data, limit)
    if codec == SNAPPY:
        return _unsnappy(data, limit)
    if codec == LZ4:
        return _into(cramjam.lz4.decompress_into, "lz4", data, limit)
    if codec == ZSTD:
        return _into(cramjam.zstd.decompress_into, "zstd", data, limit)
    raise CodecError(f"unknown compression codec {codec}")


def valid_level(codec: int, level: int) -> bool:
    """Whether Kafka takes ``level`` as ``codec``'s compression level (snappy has none)."""
    if codec not in LEVEL_RANGES:
        return False
    lowest, highest = LEVEL_RANGES[codec]
    return lowest <= level <= highest or (codec == GZIP and level == -1)


def compress(codec: int, data: _Buffer, level: int | None = None) -> bytes:
    """``data`` compressed with ``codec`` (1-4), in the framing Kafka's clients read, at ``level`` in
    Kafka's terms for that codec (None: Kafka's default; see the module doc). ``ValueError`` for a level
    Kafka would not take."""
    if level is not None and not valid_level(codec, level):
        raise ValueError(f"{level} is not a compression level of codec {codec}")
    if codec == GZIP:
        deflater = zlib.compressobj(
            DEFAULT_LEVELS[GZIP] if level is None else level, zlib.DEFLATED, _GZIP_WBITS
        )
        return deflater.compress(data) + deflater.flush()
    if codec == SNAPPY:
        view = memoryview(data)
        parts = [_XERIAL_HEADER]
        # At least one block: aiokafka and kafka-python take a header-only stream (16 bytes) for raw snappy.
        for start in range(0, max(len(view), 1), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
            parts.append(_INT32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec == LZ4:
        compressor = cramjam.lz4.Compressor(
            level=_lz4_level(level), content_checksum=False, block_linked=False
        )
        # cramjam's streaming Compressor takes only bytes (a bytearray or memoryview is a TypeError).
        compressor.compress(data if isinstance(data, bytes) else bytes(data))
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=DEFAULT_LEVELS[ZSTD] if level is None else level))
    raise ValueError(f"cannot compress with codec {codec}")


def _lz4_level(level: int | None) -> int:
    """cramjam's level for Kafka's lz4 ``level``: Kafka's default is lz4's fast compressor, any other
    level lz4's HC at that level (1 is HC's lowest, 2; above 12 is 12)."""
    if level is None or level == DEFAULT_LEVELS[LZ4]:
        return _LZ4_FAST
    return min(max(level, _LZ4_HC_MIN), _LZ4_HC_MAX)


def _too_large(name: str, limit: int) -> CodecError:
    return CodecError(f"{name} data decompresses to more than {limit} bytes (a decompression bomb?)")


def _gunzip(data: _Buffer, limit: int) -> bytes:
    out: list[bytes] = []
    produced = 0
    rest = bytes(data)
    try:
        while True:  # one gzip member per round
            inflater = zlib.decompressobj(_GZIP_WBITS)
            pending = rest
            while not inflater.eof:
                # max_length bounds each step; steps keep a bomb's peak at the limit (one big call would
                # hold its output twice while zlib joins its blocks).
                chunk = inflater.decompress(pending, min(_GZIP_STEP, limit - produced + 1))
                produced += len(chunk)
                if produced > limit:
                    raise _too_large("gzip", limit)
                out.append(chunk)
                pending = inflater.unconsumed_tail
                if not chunk and not pending and not inflater.eof:
                    raise CodecError("gzip data is truncated")
            rest = inflater.unused_data
            if not rest:
                return b"".join(out)
    except zlib.error as exc:
        raise CodecError(f"gzip data is corrupt: {exc}") from None


def _unsnappy(data: _Buffer, limit: int) -> bytes:
    view = memoryview(data)
    if len(view) >= _XERIAL_HEADER_SIZE and view[: len(_XERIAL_MAGIC)] == _XERIAL_MAGIC:
        # Java's framing. Its version and compatible fields are not checked, as librdkafka does not.
        blocks: list[bytes] = []
        produced = 0
        pos = _XERIAL_HEADER_SIZE
        while pos < len(view):
            if pos + 4 > len(view):
                raise CodecError("xerial snappy block length is truncated")
            (size,) = _INT32.unpack_from(view, pos)
            pos += 4
            if size < 0 or pos + size > len(view):
                raise CodecError(f"xerial snappy block of {size} bytes runs past the data")
            block = _raw_snappy(view[pos : pos + size], limit - produced, limit)
            produced += len(block)
            blocks.append(block)
            pos += size
        return b"".join(blocks)
    return _raw_snappy(view, limit, limit)


def _raw_snappy(block: memoryview, budget: int, limit: int) -> bytes:
    """One raw block that may produce ``budget`` bytes, the rest of the whole stream's ``limit``."""
    try:
        # The varint preamble declares the block's size: a bomb is refused before anything is allocated,
        # and decompression then writes exactly that many bytes or fails.
        size = cramjam.snappy.decompress_raw_len(block)
        if size > budget:
            raise _too_large("snappy", limit)
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as exc:
        raise CodecError(f"snappy data is corrupt: {exc}") from None


def _into(
    decompress_into: Callable[[_Buffer, memoryview], int], name: str, data: _Buffer, limit: int
) -> bytes:
    # One byte of headroom tells "exactly limit bytes" from "more than limit". cramjam writes through a
    # bounded cursor and fails once it is full, so a bomb stops at limit + 1 bytes. cramjam does not tell
    # that failure from a corrupt stream by type, so the message names both.
    with mmap.mmap(-1, limit + 1) as out:
        view = memoryview(out)
        try:
            size = decompress_into(data, view)
        except cramjam.DecompressionError as exc:
            raise CodecError(
                f"{name} data is corrupt or decompresses to more than {limit} bytes: {exc}"
            ) from None
        else:
            if size > limit:
                raise _too_large(name, limit)
            return bytes(view[:size])
        finally:
            view.release()  # before the mmap closes: an exported buffer would keep it from closing
