"""The compaction dedup map: key hash -> offset of the key's latest record (Kafka's ``OffsetMap``).

The compaction worker uses one map per partition at a time. Pass 1 puts ``(hash(key), offset)`` for every
keyed record of the dirty range in increasing offset order, so each hash ends up holding its latest offset.
Pass 2 looks up each record's hash; whether to keep the record is a pure function of that answer (not
here). ``clear()`` resets the map between partitions; the memory is allocated once, when the map is built.

Slot layout (``SkimpyOffsetMap``): one zero-filled buffer of S slots of 24 bytes, slot i at byte 24*i,
three native-endian u64 words::

    +--------------------------+--------------------------+--------------------------+
    | h1 = hash[0:8] as <u64   | h2 = hash[8:16] as <u64  | offset + 1               |
    +--------------------------+--------------------------+--------------------------+
      word 0                     word 1                     word 2; 0 means "empty"

The offset is stored plus one so that an all-zero slot is empty whatever the hash is (Kafka's map treats a
slot of 24 zero bytes as empty, which an all-zero hash with offset 0 would also be). Offsets are >= 0.

Probing: double hashing. S is the largest prime <= memory_bytes // 24; probe k of a hash is slot
``(h1 + k * (1 + h2 mod (S - 1))) mod S``. Because S is prime, every step is coprime to S and the sequence
visits every slot, and because the map never holds more than ``capacity = int(S * load_factor)`` < S
entries there is always an empty slot, so every probe ends. There are no deletes, so a lookup may stop at
the first empty slot. Double hashing behaves like random probing: at load 0.9 a miss costs ~10 probes and
a hit ~2.6 on average, against ~50 and ~5.5 for linear probing. (Kafka's first 13 probes read the
big-endian int at bytes 0, 1, ..., 12 of the MD5 hash; after that it probes linearly.)

When full: a ``put`` of a hash that is not in the map while ``size == capacity`` raises ``OffsetMapFull``
and leaves the map unchanged; a put of a hash already present always succeeds (it overwrites in place and
does not grow the map). ``put_many`` applies the longest prefix of its input that fits and returns its
length, so the worker stops pass 1 at ``offsets[n - 1]`` and cleans only up to there: Kafka's partial
cleaning. Kafka's cleaner checks ``map.size < slots * dupBufferLoadFactor`` before every put instead, so it
stops at the first record once full, even when that record's key is already in the map.

Why 24 bytes per entry: the map stores a 128-bit hash in place of the key, so the memory per key does not
depend on the key size and a fixed budget bounds the number of keys (128 MiB: 5,592,373 slots, 5,033,135
keys at load 0.9). 16 + 8 bytes is what Kafka's ``SkimpyOffsetMap`` uses with MD5. The price is that two
keys with the same hash would be treated as one key and the older one's latest record would be dropped; for
n keys the chance is about n^2 / 2^129 (~4e-26 for 5M keys).

Why a keyed hash: with an unkeyed hash such as Kafka's MD5, anyone who may produce to a compacted topic can
compute keys offline: pairs of different keys with equal MD5 (identical-prefix collisions take seconds),
which the cleaner treats as one key, so whichever of the two was written first loses its latest record
wherever such a pair is in use (keys that embed input someone else chose, say); and many keys that share a
probe sequence, which turn probing into a linear scan (hash flooding). ``KeyHasher`` hashes each key with
SipHash-2-4, a keyed pseudo-random function made for hash tables fed by untrusted keys, twice: h1 and h2
under the two halves of a random 32-byte secret drawn per compaction job. Without the secret the hash of
a key cannot be predicted, so neither can be done better than by chance (the birthday bound above).
SipHash in place of keyed BLAKE2b: the same property for keys this short, and a few dozen nanoseconds per
key in C, where compaction's scan hashes every key as it reads it (``storage/_keyscan.c``).

Batches: ``put_words`` and ``get_words`` (and ``put_many``/``get_many`` over 16-byte hashes) run the probe
loops in C over the same table (``planner/_probe.c``); ``put`` and ``get`` are the same rules in Python,
one key at a time, and tests hold the two to the same answers.

The maps are not thread-safe; each worker thread owns one.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from planner import _probe
from storage.errors import OffsetMapFull
from storage.records.columns import SIPHASH_KEY_SIZE, siphash24

HASH_SIZE = 16
"""Bytes in a key hash: two SipHash-2-4 values, h1 and h2, little-endian."""

SECRET_SIZE = 2 * SIPHASH_KEY_SIZE
"""Bytes in a ``KeyHasher`` secret: the SipHash keys of h1 and h2."""

BYTES_PER_ENTRY = HASH_SIZE + 8
"""Bytes per slot: the hash and the offset, as in Kafka's SkimpyOffsetMap."""

DEFAULT_MEMORY_BYTES = 128 * 1024 * 1024
"""Kafka's ``log.cleaner.dedupe.buffer.size`` default."""

DEFAULT_LOAD_FACTOR = 0.9
"""Kafka's ``log.cleaner.io.buffer.load.factor`` default."""

_HASH_WORDS = struct.Struct("<QQ")

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]


class KeyHasher:
    """Keyed 128-bit hash of record keys: SipHash-2-4 under two 16-byte keys (see the module docstring).

    Both passes of a job must use the same hasher; the next job draws a new secret.
    """

    __slots__ = ("key_a", "key_b")

    def __init__(self, secret: bytes) -> None:
        if len(secret) != SECRET_SIZE:
            raise ValueError(f"secret must be {SECRET_SIZE} bytes, got {len(secret)}")
        self.key_a = secret[:SIPHASH_KEY_SIZE]
        self.key_b = secret[SIPHASH_KEY_SIZE:]

    @classmethod
    def random(cls, rng: random.Random) -> KeyHasher:
        """A hasher with a 32-byte secret drawn from ``rng``.

        Production passes ``random.SystemRandom()`` (the OS CSPRNG): a secret an attacker can predict makes
        collisions computable again. Tests pass a seeded ``random.Random``.
        """
        return cls(rng.randbytes(SECRET_SIZE))

    def hash(self, key: bytes) -> bytes:
        return _HASH_WORDS.pack(siphash24(self.key_a, key), siphash24(self.key_b, key))

    def hash_many(self, keys: Sequence[bytes]) -> list[bytes]:
        return [self.hash(key) for key in keys]


@runtime_checkable
class OffsetMap(Protocol):
    """Key hash -> latest offset with a fixed capacity (Kafka's ``OffsetMap``).

    ``put`` raises ``ValueError`` for a hash that is not 16 bytes or a negative offset, and ``OffsetMapFull``
    for a new hash at capacity. ``put_many`` needs non-decreasing offsets (records in log order) and returns
    how many leading items it applied; items after that were not applied at all.
    """

    def put(self, key_hash: bytes, offset: int) -> None: ...

    def get(self, key_hash: bytes) -> int:
        """The offset last put for ``key_hash``, or -1."""
        ...

    def put_many(self, hashes: Sequence[bytes], offsets: Sequence[int]) -> int: ...

    def get_many(self, hashes: Sequence[bytes]) -> list[int]: ...

    def put_words(self, h1: U64, h2: U64, offsets: I64) -> int:
        """``put_many`` with each hash given as its two words (``h1``, ``h2``: the hash's little-endian
        halves), as compaction's column scan produces them."""
        ...

    def get_words(self, h1: U64, h2: U64) -> I64:
        """``get_many`` with each hash given as its two words."""
        ...

    def clear(self) -> None: ...

    @property
    def size(self) -> int:
        """Entries (distinct hashes) put since the last clear."""
        ...

    @property
    def slots(self) -> int: ...

    @property
    def capacity(self) -> int:
        """The most entries the map accepts: ``int(slots * load_factor)``."""
        ...

    @property
    def latest_offset(self) -> int:
        """The largest offset put since the last clear, or -1."""
        ...

    @property
    def utilization(self) -> float:
        """``size / slots``, as Kafka's cleaner reports it (so at most the load factor)."""
        ...

    @property
    def memory_bytes(self) -> int:
        """Bytes allocated for entries; at most ``24 * slots``."""
        ...


def _check_hash(key_hash: bytes) -> None:
    if len(key_hash) != HASH_SIZE:
        raise ValueError(f"key hash must be {HASH_SIZE} bytes, got {len(key_hash)}")


def _check_offset(offset: int) -> None:
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")


def _check_batch(hashes: Sequence[bytes], offsets: Sequence[int]) -> None:
    if len(hashes) != len(offsets):
        raise ValueError(f"{len(hashes)} hashes but {len(offsets)} offsets")
    if hashes and set(map(len, hashes)) != {HASH_SIZE}:
        raise ValueError(f"every key hash must be {HASH_SIZE} bytes")


def _check_offsets(offs: I64) -> None:
    if offs.size and int(offs.min()) < 0:
        raise ValueError("offsets must be >= 0")
    if offs.size > 1 and bool(np.any(offs[1:] < offs[:-1])):
        raise ValueError("offsets must be non-decreasing (records in log order)")


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    small = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)
    for p in small:
        if n % p == 0:
            return n == p
    d, r = n - 1, 0
    while d % 2 == 0:
        d //= 2
        r += 1
    for a in small:  # these bases make Miller-Rabin exact for n < 3.3e24
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _prime_at_most(n: int) -> int:
    while n >= 2 and not _is_prime(n):
        n -= 1
    return n


class SkimpyOffsetMap:
    """Open addressing with double hashing in one preallocated buffer (layout in the module docstring).

    Single-key ``put``/``get`` run in Python over a ``memoryview`` of the buffer; the batch calls run the
    same probe sequences in C (``planner/_probe.c``).
    """

    def __init__(
        self, memory_bytes: int = DEFAULT_MEMORY_BYTES, load_factor: float = DEFAULT_LOAD_FACTOR
    ) -> None:
        if not 0.0 < load_factor < 1.0:
            raise ValueError(f"load_factor must be in (0, 1), got {load_factor}")
        slots = _prime_at_most(memory_bytes // BYTES_PER_ENTRY)
        capacity = int(slots * load_factor)
        if slots < 3 or capacity < 1:
            raise ValueError(f"{memory_bytes} bytes is too small for an offset map")
        self._slots = slots
        self._capacity = capacity
        # calloc: pages become resident as slots are first written, and stay resident across clear().
        self._table: U64 = np.zeros((slots, 3), dtype=np.uint64)
        self._words = self._table.data.cast("B").cast("Q")
        self._size = 0
        self._latest = -1

    @property
    def size(self) -> int:
        return self._size

    @property
    def slots(self) -> int:
        return self._slots

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def latest_offset(self) -> int:
        return self._latest

    @property
    def utilization(self) -> float:
        return self._size / self._slots

    @property
    def memory_bytes(self) -> int:
        return self._table.nbytes

    def clear(self) -> None:
        """Zero the buffer (a memset), as Kafka does; nothing to do if nothing was put."""
        if self._size:
            self._table.fill(0)
        self._size = 0
        self._latest = -1

    # --- one key at a time ---------------------------------------------------------------------------------

    def put(self, key_hash: bytes, offset: int) -> None:
        _check_hash(key_hash)
        _check_offset(offset)
        h1, h2 = _HASH_WORDS.unpack(key_hash)
        w = self._words
        slots = self._slots
        pos = h1 % slots
        step = 1 + h2 % (slots - 1)
        i = 3 * pos
        while w[i + 2]:
            if w[i] == h1 and w[i + 1] == h2:
                w[i + 2] = offset + 1
                if offset > self._latest:
                    self._latest = offset
                return
            pos += step
            if pos >= slots:
                pos -= slots
            i = 3 * pos
        if self._size >= self._capacity:
            raise OffsetMapFull(self._size, self._capacity)
        w[i] = h1
        w[i + 1] = h2
        w[i + 2] = offset + 1
        self._size += 1
        if offset > self._latest:
            self._latest = offset

    def get(self, key_hash: bytes) -> int:
        _check_hash(key_hash)
        h1, h2 = _HASH_WORDS.unpack(key_hash)
        w = self._words
        slots = self._slots
        pos = h1 % slots
        step = 1 + h2 % (slots - 1)
        i = 3 * pos
        while stored := w[i + 2]:
            if w[i] == h1 and w[i + 1] == h2:
                return int(stored) - 1
            pos += step
            if pos >= slots:
                pos -= slots
            i = 3 * pos
        return -1

    # --- batches -------------------------------------------------------------------------------------------

    def get_many(self, hashes: Sequence[bytes]) -> list[int]:
        if not hashes:
            return []
        if set(map(len, hashes)) != {HASH_SIZE}:
            raise ValueError(f"every key hash must be {HASH_SIZE} bytes")
        out: list[int] = self.get_words(*_split(hashes)).tolist()
        return out

    def put_many(self, hashes: Sequence[bytes], offsets: Sequence[int]) -> int:
        """Put ``(hashes[i], offsets[i])`` in order; return how many leading items fit (all, unless full).

        The result equals calling ``put`` for each item and stopping at the first ``OffsetMapFull``.
        """
        _check_batch(hashes, offsets)
        if not hashes:
            return 0
        return self.put_words(*_split(hashes), _offset_array(offsets))

    def get_words(self, h1: U64, h2: U64) -> I64:
        return np.frombuffer(
            _probe.get_many(self._table, self._slots, _words(h1), _words(h2)), dtype=np.int64
        )

    def put_words(self, h1: U64, h2: U64, offsets: I64) -> int:
        offs = np.ascontiguousarray(offsets, dtype=np.int64)
        if not h1.shape[0] == h2.shape[0] == offs.shape[0]:
            raise ValueError(f"{h1.shape[0]} h1, {h2.shape[0]} h2 and {offs.shape[0]} offsets")
        if offs.size == 0:
            return 0
        _check_offsets(offs)
        stored, self._size = _probe.put_many(
            self._table, self._slots, self._capacity, self._size, _words(h1), _words(h2), offs
        )
        if stored:
            self._latest = max(self._latest, int(offs[stored - 1]))
        return int(stored)


def _words(column: U64) -> U64:
    return np.ascontiguousarray(column, dtype=np.uint64)


def _offset_array(offsets: Sequence[int]) -> I64:
    if isinstance(offsets, range):  # numpy would convert a range one Python int at a time
        return np.arange(offsets.start, offsets.stop, offsets.step, dtype=np.int64)
    return np.fromiter(offsets, dtype=np.int64, count=len(offsets))


def _split(hashes: Sequence[bytes]) -> tuple[U64, U64]:
    """The two u64 words of each 16-byte hash (lengths already checked), as contiguous native arrays."""
    words = np.frombuffer(b"".join(hashes), dtype="<u8").reshape(-1, 2)
    return words[:, 0].astype(np.uint64), words[:, 1].astype(np.uint64)


class FakeOffsetMap:
    """A dict with the same semantics and checks as ``SkimpyOffsetMap``, for tests of the compaction worker.

    Kafka's ``FakeOffsetMap`` in ``LogCleanerTest``, plus a capacity: ``capacity`` is also ``slots`` (a dict
    has no load factor), so a test can make the worker fill the map after any number of keys.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self._capacity = capacity
        self._map: dict[bytes, int] = {}
        self._latest = -1

    @property
    def size(self) -> int:
        return len(self._map)

    @property
    def slots(self) -> int:
        return self._capacity

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def latest_offset(self) -> int:
        return self._latest

    @property
    def utilization(self) -> float:
        return len(self._map) / self._capacity

    @property
    def memory_bytes(self) -> int:
        return 0  # nothing is allocated up front

    def clear(self) -> None:
        self._map.clear()
        self._latest = -1

    def put(self, key_hash: bytes, offset: int) -> None:
        _check_hash(key_hash)
        _check_offset(offset)
        if key_hash not in self._map and len(self._map) >= self._capacity:
            raise OffsetMapFull(len(self._map), self._capacity)
        self._map[key_hash] = offset
        if offset > self._latest:
            self._latest = offset

    def get(self, key_hash: bytes) -> int:
        _check_hash(key_hash)
        return self._map.get(key_hash, -1)

    def put_many(self, hashes: Sequence[bytes], offsets: Sequence[int]) -> int:
        _check_batch(hashes, offsets)
        _check_offsets(_offset_array(offsets))
        for i, (key_hash, offset) in enumerate(zip(hashes, offsets, strict=True)):
            try:
                self.put(key_hash, offset)
            except OffsetMapFull:
                return i
        return len(hashes)

    def get_many(self, hashes: Sequence[bytes]) -> list[int]:
        return [self.get(h) for h in hashes]

    def put_words(self, h1: U64, h2: U64, offsets: I64) -> int:
        return self.put_many(_join(h1, h2), np.asarray(offsets, dtype=np.int64).tolist())

    def get_words(self, h1: U64, h2: U64) -> I64:
        return np.array(self.get_many(_join(h1, h2)), dtype=np.int64)


def _join(h1: U64, h2: U64) -> list[bytes]:
    """16-byte hashes from their two words (the inverse of ``_split``)."""
    words = np.empty((h1.shape[0], 2), dtype="<u8")
    words[:, 0] = h1
    words[:, 1] = h2
    raw = words.tobytes()
    return [raw[i : i + HASH_SIZE] for i in range(0, len(raw), HASH_SIZE)]
