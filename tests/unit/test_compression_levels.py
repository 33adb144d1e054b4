"""``storage.records.compression.compress``'s ``level``: Kafka's ``compression.{gzip,lz4,zstd}.level`` mapped
onto zlib and cramjam as Kafka 4.4's broker maps them onto its libraries, and the batch writers over it
(the encoders, the re-compression, compaction's filter and its delete-horizon re-encode) passing it on."""

from __future__ import annotations

import zlib

import cramjam
import pytest

from storage import records
from storage.records import compression
from storage.records.columns import scan_columns
from storage.records.compression import GZIP, LZ4, SNAPPY, ZSTD, compress, decompress

NOW = 1_700_000_000_000
# Text-like records, so every level finds something to do.
DATA = b"".join(b'{"user": "user-%d", "event": "click", "page": "/p/%d"}' % (i % 97, i) for i in range(3000))


def gzip_body(stream: bytes) -> bytes:
    """A gzip member's deflate stream: what a level decides (the 10-byte header and 8-byte trailer do not)."""
    return stream[10:-8]


def zlib_deflate(data: bytes, level: int) -> bytes:
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return deflater.compress(data) + deflater.flush()


def cramjam_lz4(data: bytes, level: int) -> bytes:
    compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
    compressor.compress(data)
    return bytes(compressor.finish())


def section(batch: bytes | memoryview) -> bytes:
    """The batch's records section as stored (compressed or not)."""
    header = records.read_header(batch, 0, True)
    return bytes(memoryview(batch)[records.RECORD_BATCH_OVERHEAD : header.size])


# --- compress: Kafka's levels onto the libraries --------------------------------------------------------


def test_gzip_levels_are_zlibs_and_minus_one_is_six() -> None:
    one, nine = compress(GZIP, DATA, 1), compress(GZIP, DATA, 9)
    assert len(one) > len(nine)
    assert gzip_body(one) == zlib_deflate(DATA, 1)
    assert gzip_body(nine) == zlib_deflate(DATA, 9)
    assert compress(GZIP, DATA, -1) == compress(GZIP, DATA, 6) == compress(GZIP, DATA)
    for packed in (one, nine):
        assert decompress(GZIP, packed, len(DATA)) == DATA


def test_lz4_levels_map_as_kafkas_writer_does() -> None:
    """Kafka's default 9 is lz4's fast compressor; other levels are HC at that level, 1 being HC's lowest
    (2) and 13-17 its highest (12)."""
    fast = cramjam_lz4(DATA, 0)
    assert compress(LZ4, DATA) == compress(LZ4, DATA, 9) == fast
    assert compress(LZ4, DATA, 1) == compress(LZ4, DATA, 2) == cramjam_lz4(DATA, 2) != fast
    for level in (3, 8, 10, 12):
        assert compress(LZ4, DATA, level) == cramjam_lz4(DATA, level)
    assert compress(LZ4, DATA, 13) == compress(LZ4, DATA, 17) == cramjam_lz4(DATA, 12)
    assert len(compress(LZ4, DATA, 12)) < len(compress(LZ4, DATA, 3)) < len(fast)
    for level in (1, 9, 17):
        assert decompress(LZ4, compress(LZ4, DATA, level), len(DATA)) == DATA


def test_zstd_levels_are_zstds() -> None:
    for level in (-131072, -5, 1, 19, 22):
        packed = compress(ZSTD, DATA, level)
        assert packed == bytes(cramjam.zstd.compress(DATA, level=level))
        assert decompress(ZSTD, packed, len(DATA)) == DATA
    assert compress(ZSTD, DATA, 0) == compress(ZSTD, DATA, 3) == compress(ZSTD, DATA)
    assert len(compress(ZSTD, DATA, 19)) < len(compress(ZSTD, DATA, 3)) < len(compress(ZSTD, DATA, -5))


@pytest.mark.parametrize(
    ("codec", "level"), [(GZIP, 0), (GZIP, 10), (LZ4, 0), (LZ4, 18), (ZSTD, 23), (SNAPPY, 1)]
)
def test_a_level_kafka_would_not_take_is_a_value_error(codec: int, level: int) -> None:
    assert not compression.valid_level(codec, level)
    with pytest.raises(ValueError, match="compression level"):
        compress(codec, DATA, level)


# --- the writers over it --------------------------------------------------------------------------------


def sample(n: int = 40) -> list[records.Record]:
    return [records.Record(i, NOW + i, f"k{i % 5}".encode(), DATA[i * 50 : i * 50 + 400]) for i in range(n)]


def test_encoders_and_the_recompression_write_the_level() -> None:
    recs = sample()
    plain = records.encode_batch(recs)
    raw = section(plain)
    header = records.read_header(plain, 0, True)
    for level in (1, 9):
        compiled = records.encode_batch(recs, codec=GZIP, level=level)
        reference = records.encode.encode_batch_reference(recs, codec=GZIP, level=level)
        recompressed = records.recompress_batch(plain, header, GZIP, level=level)
        c_loop = records.batch_of_records(raw, len(recs), NOW, NOW + len(recs) - 1, GZIP, None, level)
        assert compiled == reference == recompressed == c_loop
        assert gzip_body(section(compiled)) == zlib_deflate(raw, level)
        assert list(records.decode_records(compiled)) == recs
    assert records.encode_batch(recs, codec=GZIP, level=1) != records.encode_batch(recs, codec=GZIP, level=9)
    zstd19 = records.recompress_batch(plain, header, ZSTD, level=19)
    assert section(zstd19) == bytes(cramjam.zstd.compress(raw, level=19))


def test_compaction_rewrites_at_the_level_it_is_given() -> None:
    """Both compaction's filter and its delete-horizon re-encode compress at the level they are given."""
    recs = [*sample(20), records.Record(20, NOW + 20, b"k0", None)]
    batch = records.encode_batch(recs, codec=ZSTD)
    header = records.read_header(batch, 0, True)
    key = bytes(16)
    cols = scan_columns(batch, header, 0, key, key)
    kept = list(range(0, 21, 2))
    for horizon in (None, NOW + 86_400_000):
        by_level = {}
        for level in (1, 19):
            out = records.filter_ranges(
                batch,
                header,
                [int(cols.offsets[i]) for i in kept],
                int(cols.timestamps[kept].max()),
                [(int(cols.starts[i]), int(cols.ends[i])) for i in kept],
                offset_base=0,
                base_offset=0,
                delete_horizon_ms=horizon,
                level=level,
            )
            raw = section(records.encode_batch(list(records.decode_records(out)), delete_horizon_ms=horizon))
            assert section(out) == bytes(cramjam.zstd.compress(raw, level=level))
            assert [r.offset for r in records.decode_records(out)] == kept
            by_level[level] = out
        assert by_level[1] != by_level[19]
