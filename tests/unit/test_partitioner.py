"""murmur2 and key partitioning must match Kafka's Java client bit for bit."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.partitioner import murmur2, partition_for_key
from tests.examples import examples

# Kafka's clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, testMurmur2.
KAFKA_MURMUR2_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]

# kafka-python's test_murmur2_java_compatibility: "compare with output from Kafka's
# org.apache.kafka.clients.producer.Partitioner", 1000 partitions.
JAVA_PARTITIONS_OF_1000 = [
    (b"", 681),
    (b"a", 524),
    (b"ab", 434),
    (b"abc", 107),
    (b"123456789", 566),
    (b"\x00 ", 742),
]

# A public Spock specification that asserts these against BuiltInPartitioner.partitionForKey and against
# Utils.toPositive(Utils.murmur2(key)) % 10.
JAVA_PARTITIONS_OF_10 = [(b"a", 4), (b"b", 6), (b"c", 4), (b"d", 3), (b"e", 4)]


@pytest.mark.parametrize(("key", "expected"), KAFKA_MURMUR2_VECTORS)
def test_murmur2_matches_kafka_utils_test(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@pytest.mark.parametrize(("key", "expected"), JAVA_PARTITIONS_OF_1000)
def test_partition_matches_java_client_1000_partitions(key: bytes, expected: int) -> None:
    assert partition_for_key(key, 1000) == expected


@pytest.mark.parametrize(("key", "expected"), JAVA_PARTITIONS_OF_10)
def test_partition_matches_java_client_10_partitions(key: bytes, expected: int) -> None:
    assert partition_for_key(key, 10) == expected


def test_to_positive_masks_rather_than_negates() -> None:
    # murmur2(b"21") is negative; Kafka masks the sign bit, which differs from abs().
    h = murmur2(b"21")
    assert h < 0
    assert partition_for_key(b"21", 2**31 - 1) == (h & 0x7FFFFFFF) % (2**31 - 1)
    assert partition_for_key(b"21", 2**31 - 1) != abs(h) % (2**31 - 1)


def test_accepts_bytes_like_keys() -> None:
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"xfoobar")[1:]) == -790332482


def test_rejects_non_positive_partition_counts() -> None:
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)
    with pytest.raises(ValueError):
        partition_for_key(b"k", -3)


def _java_int(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n >= 1 << 31 else n


def _urshift(n: int, bits: int) -> int:
    return (n & 0xFFFFFFFF) >> bits


def _reference_murmur2(data: bytes) -> int:
    """A line-by-line transliteration of Utils.murmur2 with Java's wrapping int arithmetic."""
    length = len(data)
    m = _java_int(0x5BD1E995)
    h = _java_int(_java_int(0x9747B28C) ^ length)
    for i in range(length // 4):
        i4 = i * 4
        k = _java_int(data[i4] + (data[i4 + 1] << 8) + (data[i4 + 2] << 16) + (data[i4 + 3] << 24))
        k = _java_int(k * m)
        k = _java_int(k ^ _urshift(k, 24))
        k = _java_int(k * m)
        h = _java_int(h * m)
        h = _java_int(h ^ k)
    rest = length % 4
    if rest == 3:
        h = _java_int(h ^ (data[(length & ~3) + 2] << 16))
    if rest >= 2:
        h = _java_int(h ^ (data[(length & ~3) + 1] << 8))
    if rest >= 1:
        h = _java_int(h ^ data[length & ~3])
        h = _java_int(h * m)
    h = _java_int(h ^ _urshift(h, 13))
    h = _java_int(h * m)
    return _java_int(h ^ _urshift(h, 15))


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=64), st.integers(1, 10_000))
def test_matches_java_transliteration(key: bytes, partitions: int) -> None:
    assert murmur2(key) == _reference_murmur2(key)
    assert -(2**31) <= murmur2(key) < 2**31
    assert 0 <= partition_for_key(key, partitions) < partitions


# --- the compiled partitioner (confluent-kafka's librdkafka murmur2) against the Python murmur2 ----------


@settings(max_examples=examples(1000), deadline=None)
@given(
    st.binary(max_size=300),
    st.integers(1, 2**31 - 1) | st.integers(1, 64) | st.sampled_from([1, 2, 3, 1000, 2**31 - 1]),
)
def test_compiled_partition_matches_python_murmur2(key: bytes, partitions: int) -> None:
    expected = (murmur2(key) & 0x7FFFFFFF) % partitions
    assert partition_for_key(key, partitions) == expected
    assert partition_for_key(bytearray(key), partitions) == expected
    assert partition_for_key(memoryview(b"x" + key)[1:], partitions) == expected


def test_compiled_partition_over_many_random_keys() -> None:
    # Byte-for-byte equality over 100,000 keys of every length up to 100, from a fixed seed.
    rng = random.Random(20_260_101)
    for i in range(100_000):
        key = rng.randbytes(i % 101)
        partitions = rng.randrange(1, 5000)
        assert partition_for_key(key, partitions) == (murmur2(key) & 0x7FFFFFFF) % partitions


def test_partition_counts_past_int32_use_the_python_murmur2() -> None:
    # librdkafka's partition count is an int32; Kafka's is too, so only the Python path can serve these.
    assert partition_for_key(b"21", 2**31) == (murmur2(b"21") & 0x7FFFFFFF) % 2**31
    assert partition_for_key(b"abc", 2**40) == murmur2(b"abc") & 0x7FFFFFFF
