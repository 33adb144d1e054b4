"""Kafka's key partitioner: murmur2 exactly as ``org.apache.kafka.common.utils.Utils.murmur2``.

A keyed record goes to ``toPositive(murmur2(key)) % numPartitions``, as in Kafka's ``BuiltInPartitioner``
(and the older ``DefaultPartitioner``), so a key lands in the same partition whether a Kafka client or
Strata's HTTP API produced it. ``toPositive`` masks the sign bit (``& 0x7fffffff``); it is not ``abs``.

Java does this arithmetic in wrapping signed 32-bit ints; here every step is masked to 32 bits and the result
is reinterpreted as signed at the end, which gives the same bits.

**Compiled on the produce path.** ``partition_for_key`` runs once per keyed record, so it calls
confluent-kafka's ``murmur2(key, partition_count)``: librdkafka's murmur2 partitioner, documented as
Java-compatible (``(murmur2(key) & 0x7fffffff) % partition_cnt``) and public since confluent-kafka 2.13. Why
that library: none of the others Strata installs has a compiled murmur2 (aiokafka's and kafka-python's are
pure Python), confluent-kafka is Confluent's maintained client, and its wheels bundle librdkafka. Its murmur2
is more than ten times faster than the Python below. The Python ``murmur2`` stays: it is the reference
(``tests/unit/test_partitioner.py`` checks both against Kafka's vectors and each other over random keys), and
it serves partition counts above 2^31 - 1, which librdkafka's int32 count cannot take (Kafka's partition
counts are int32, so none reaches it).

confluent-kafka is imported on the first keyed record, not with this module: it takes about 12 MiB of an
agent's memory, which an agent whose records come partitioned (all of the Kafka door's) never needs.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

__all__ = ["murmur2", "partition_for_key"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_INT32_MAX = (1 << 31) - 1

_compiled: Callable[[bytes, int], int] | None = None  # confluent-kafka's murmur2, once imported


def _load_compiled() -> Callable[[bytes, int], int]:
    global _compiled
    from confluent_kafka import murmur2 as librdkafka_partition

    _compiled = librdkafka_partition
    return librdkafka_partition


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Return Kafka's murmur2 hash of ``data`` as a signed 32-bit int (Java's ``int``)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    # Kafka reads each 4-byte block little-endian, whatever the platform.
    for (k,) in struct.iter_unpack("<I", data[:whole]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest:
        # Java's switch falls through from case 3 to case 1; the multiply happens once, after the last byte.
        if rest == 3:
            h ^= data[whole + 2] << 16
        if rest >= 2:
            h ^= data[whole + 1] << 8
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """Return the partition Kafka's default partitioner picks for ``key`` among ``num_partitions``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    if num_partitions > _INT32_MAX:
        return (murmur2(key) & 0x7FFFFFFF) % num_partitions
    compiled = _compiled or _load_compiled()
    # librdkafka's wrapper takes read-only bytes only.
    return compiled(key if type(key) is bytes else bytes(key), num_partitions)
