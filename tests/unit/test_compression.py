"""storage/records/compression.py: the four Kafka codecs against other libraries' writers and readers, the
bound on decompressed output, and garbage giving only CodecError."""

from __future__ import annotations

import io
import subprocess
import sys
import zlib

import cramjam
import lz4.frame
import pytest
import snappy
import zstandard
from aiokafka import codec as aiokafka_codec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_python_codec

from storage.errors import CodecError
from storage.records import compression
from storage.records.compression import GZIP, LZ4, SNAPPY, ZSTD, compress, decompress, output_limit
from tests.examples import examples

CODECS = [GZIP, SNAPPY, LZ4, ZSTD]
FAST = settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Compressible and incompressible data, some of it larger than one 32 KiB xerial block.
_payloads = st.one_of(
    st.binary(max_size=2000),
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=64), st.integers(1, 3000)),
)


def _or_codec_error(codec: int, data: bytes, limit: int = 1 << 20) -> bytes | None:
    """Decompress; None on CodecError. Any other exception escapes and fails the test."""
    try:
        return decompress(codec, data, limit)
    except CodecError:
        return None


@FAST
@given(st.sampled_from(CODECS), _payloads)
def test_round_trip_and_the_exact_bound(codec: int, data: bytes) -> None:
    packed = compress(codec, data)
    assert decompress(codec, packed, len(data)) == data  # exactly at the limit is allowed
    if data:
        with pytest.raises(CodecError, match="more than"):
            decompress(codec, packed, len(data) - 1)


# Other writers: what Kafka clients send, decoded here; what Strata writes, decoded by the clients' readers.
_OTHER_WRITERS = {
    GZIP: [kafka_python_codec.gzip_encode, aiokafka_codec.gzip_encode],
    SNAPPY: [
        kafka_python_codec.snappy_encode,  # xerial framing, as Java writes
        aiokafka_codec.snappy_encode,
        snappy.compress,  # raw, as librdkafka writes
        lambda b: bytes(cramjam.snappy.compress_raw(b)),
    ],
    LZ4: [kafka_python_codec.lz4_encode, aiokafka_codec.lz4_encode, lz4.frame.compress],
    ZSTD: [kafka_python_codec.zstd_encode, aiokafka_codec.zstd_encode],
}
_OTHER_READERS = {
    GZIP: [kafka_python_codec.gzip_decode, aiokafka_codec.gzip_decode],
    SNAPPY: [kafka_python_codec.snappy_decode, aiokafka_codec.snappy_decode],
    LZ4: [kafka_python_codec.lz4_decode, aiokafka_codec.lz4_decode, lz4.frame.decompress],
    ZSTD: [kafka_python_codec.zstd_decode, aiokafka_codec.zstd_decode],
}


@FAST
@given(st.sampled_from(CODECS), _payloads, st.data())
def test_reads_what_kafka_clients_write_and_they_read_what_strata_writes(
    codec: int, data: bytes, draw: st.DataObject
) -> None:
    writer = draw.draw(st.sampled_from(_OTHER_WRITERS[codec]))
    assert decompress(codec, bytes(writer(data)), len(data)) == data
    reader = draw.draw(st.sampled_from(_OTHER_READERS[codec]))
    assert bytes(reader(compress(codec, data))) == data


def test_xerial_snappy_framing() -> None:
    data = bytes(range(256)) * 700  # 179200 bytes: six 32 KiB blocks
    ours = compress(SNAPPY, data)
    assert ours[:16] == b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" * 2
    theirs = kafka_python_codec.snappy_encode(data, xerial_compatible=True, xerial_blocksize=32 * 1024)
    assert ours == theirs  # same framing, same blocks: cramjam is also kafka-python's raw snappy here
    assert decompress(SNAPPY, theirs, len(data)) == data
    # Several blocks are bounded together: the limit applies to the whole stream, not to each block.
    with pytest.raises(CodecError, match=f"more than {len(data) - 1} bytes"):
        decompress(SNAPPY, theirs, len(data) - 1)
    # A raw stream (librdkafka's) of the same data.
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(data)), len(data)) == data
    # The header alone is an empty stream; a block length running past the end is corrupt.
    assert decompress(SNAPPY, ours[:16], 0) == b""
    for broken in (ours[:18], ours[:16] + b"\xff\xff\xff\xff", ours[:-1], ours[:16] + b"\x00\x00\x00\x05ab"):
        with pytest.raises(CodecError):
            decompress(SNAPPY, broken, len(data))


def test_zstd_frames_without_a_content_size() -> None:
    data = b"strata " * 5000
    one_shot = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    sink = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(sink, closefd=False) as writer:  # as librdkafka streams
        writer.write(data[:100])
        writer.write(data[100:])
    streamed = sink.getvalue()
    for frame in (one_shot, streamed):
        assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
        with pytest.raises(zstandard.ZstdError):  # the trap: it needs the frame's content size
            zstandard.ZstdDecompressor().decompress(frame)
        assert decompress(ZSTD, frame, len(data)) == data
    assert decompress(ZSTD, one_shot + streamed, 2 * len(data)) == data * 2  # concatenated frames


def test_concatenated_gzip_members_as_java_reads_them() -> None:
    assert decompress(GZIP, compress(GZIP, b"abc") + compress(GZIP, b"def"), 6) == b"abcdef"
    with pytest.raises(CodecError, match="more than 5"):
        decompress(GZIP, compress(GZIP, b"abc") + compress(GZIP, b"def"), 5)
    with pytest.raises(CodecError):
        decompress(GZIP, compress(GZIP, b"abc") + b"trailing", 100)


def test_output_limit() -> None:
    assert output_limit(0) == compression.OUTPUT_LIMIT_FLOOR == 64 << 20
    assert output_limit(100 << 20) == 1600 << 20


# --- decompression bombs ----------------------------------------------------------------------------------

_BOMB_SIZE = 512 << 20  # 8x the limit below
_BOMB_SCRIPT = """
import sys, zlib
import cramjam, zstandard
from storage.records.compression import GZIP, SNAPPY, LZ4, ZSTD, decompress
from storage.errors import CodecError

size, zero = {size}, bytes(1 << 20)
gz = zlib.compressobj(1, zlib.DEFLATED, 31)
gzip_bomb = b"".join(gz.compress(zero) for _ in range(size >> 20)) + gz.flush()
lz = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
for _ in range(size >> 20):
    lz.compress(zero)
lz4_bomb = bytes(lz.finish())
zs = zstandard.ZstdCompressor().compressobj()  # streamed: no content size in the frame
zstd_bomb = b"".join(zs.compress(zero) for _ in range(size >> 20)) + zs.flush()
# Raw snappy by hand: the size preamble, a one-byte literal, then 64-byte copies at offset 1.
snappy_bomb = bytearray()
n = size
while n >= 0x80:
    snappy_bomb.append((n & 0x7F) | 0x80)
    n >>= 7
snappy_bomb += bytes([n, 0x00, 0x00]) + b"\\xfe\\x01\\x00" * ((size - 1) // 64)
bombs = {{GZIP: gzip_bomb, SNAPPY: bytes(snappy_bomb), LZ4: lz4_bomb, ZSTD: zstd_bomb}}


def kib(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field))


with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")  # resets VmHWM, the peak RSS, to the current RSS: building the bombs is not counted
before = kib("VmRSS:")
for codec, bomb in bombs.items():
    try:
        decompress(codec, bomb, 64 << 20)
    except CodecError as exc:
        print(codec, exc.message)
    else:
        sys.exit(f"codec {{codec}}: no CodecError")
grown = kib("VmHWM:") - before
print("peak growth KiB", grown)
sys.exit(0 if grown < 100 << 10 else f"peak RSS grew by {{grown}} KiB")
"""


def test_decompression_bombs_give_codec_error_within_the_bound() -> None:
    # In a child process, so its peak RSS measures only this: each codec's bomb (512 MiB of zeros) stops
    # at the 64 MiB bound, and the peak grows by less than 100 MiB, not by 512.
    script = _BOMB_SCRIPT.format(size=_BOMB_SIZE)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("(a decompression bomb?)") + done.stdout.count("corrupt or decompresses") == 4


# --- garbage -----------------------------------------------------------------------------------------------


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(CODECS), st.binary(max_size=300))
def test_random_bytes_give_only_codec_error(codec: int, data: bytes) -> None:
    _or_codec_error(codec, data)
    _or_codec_error(codec, compression._XERIAL_HEADER + data)


@FAST
@given(st.sampled_from(CODECS), _payloads, st.data())
def test_damaged_streams_give_only_codec_error(codec: int, data: bytes, draw: st.DataObject) -> None:
    packed = bytearray(compress(codec, data))
    cut = draw.draw(st.integers(0, len(packed) - 1))
    _or_codec_error(codec, bytes(packed[:cut]))
    packed[cut] ^= draw.draw(st.integers(1, 255))
    _or_codec_error(codec, bytes(packed))


@pytest.mark.parametrize("codec", [0, 5, 6, 7, -1])
def test_undefined_codecs(codec: int) -> None:
    with pytest.raises(CodecError, match="unknown compression codec"):
        decompress(codec, b"x", 10)
    with pytest.raises(ValueError, match="cannot compress"):
        compress(codec, b"x")


def test_gzip_from_the_standard_library_and_zlib_streams() -> None:
    import gzip

    data = b"kafka" * 1000
    assert decompress(GZIP, gzip.compress(data), len(data)) == data
    with pytest.raises(CodecError):  # a zlib (not gzip) stream is another format
        decompress(GZIP, zlib.compress(data), len(data))


def test_every_codec_compresses_every_buffer_type() -> None:
    """``compress`` takes bytes, bytearray and memoryview alike (cramjam lz4 Compressor: bytes only)."""
    data = b"strata " * 100
    for codec in (compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD):
        expected = compression.compress(codec, data)
        for buffer in (bytearray(data), memoryview(data)):
            assert compression.compress(codec, buffer) == expected
