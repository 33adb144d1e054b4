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
probe sequence, which turn probing into a linear scan (hash flooding). ``KeyHasher`` uses BLAKE2b keyed
with a random secret per compaction job, so without the secret the hash of a key cannot be predicted, and
neither can be done better than by chance (the birthday bound above).

The maps are not thread-safe; each worker thread owns one.
"""

from __future__ import annotations

import hashlib
import random
import struct
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from storage.errors import OffsetMapFull

HASH_SIZE = 16
"""Bytes in a key hash (BLAKE2b-128)."""

BYTES_PER_ENTRY = HASH_SIZE + 8
"""Bytes per slot: the hash and the offset, as in Kafka's SkimpyOffsetMap."""

DEFAULT_MEMORY_BYTES = 128 * 1024 * 1024
"""Kafka's ``log.cleaner.dedupe.buffer.size`` default."""

DEFAULT_LOAD_FACTOR = 0.9
"""Kafka's ``log.cleaner.io.buffer.load.factor`` default."""

_HASH_WORDS = struct.Struct("<QQ")

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
Positions = npt.NDArray[np.intp]
Mask = npt.NDArray[np.bool_]


class KeyHasher:
    """Keyed 128-bit hash of record keys: BLAKE2b with a per-job secret (see the module docstring).

    Both passes of a job must use the same hasher; the next job draws a new secret.
    """

    __slots__ = ("_proto",)

    def __init__(self, secret: bytes) -> None:
        if not 16 <= len(secret) <= 64:
            raise ValueError(f"secret must be 16 to 64 bytes, got {len(secret)}")
        # Keying BLAKE2b costs a compression of the key block; copy a keyed state instead of redoing it.
        self._proto = hashlib.blake2b(digest_size=HASH_SIZE, key=secret)

    @classmethod
    def random(cls, rng: random.Random) -> KeyHasher:
        """A hasher with a 32-byte secret drawn from ``rng``.

        Production passes ``random.SystemRandom()`` (the OS CSPRNG): a secret an attacker can predict makes
        collisions computable again. Tests pass a seeded ``random.Random``.
        """
        return cls(rng.randbytes(32))

    def hash(self, key: bytes) -> bytes:
        h = self._proto.copy()
        h.update(key)
        return h.digest()

    def hash_many(self, keys: Sequence[bytes]) -> list[bytes]:
        copy = self._proto.copy
        out: list[bytes] = []
        append = out.append
        for key in keys:
            h = copy()
            h.update(key)
            append(h.digest())
        return out


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

    Single-key ``put``/``get`` run in Python over a ``memoryview`` of the buffer; ``put_many``/``get_many``
    run the same probe sequences vectorised with numpy, one probe step for all pending items at a time, and
    finish the last few items in Python.
    """

    # Below this many pending items a vectorised probe step costs more than probing them one by one.
    _scalar_tail = 192
    # put_many probes at most this many items ahead (bounds its temporary arrays, ~100 B per item).
    _window = 1 << 18

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
        self._h1col: U64 = self._table[:, 0]
        self._h2col: U64 = self._table[:, 1]
        self._offcol: U64 = self._table[:, 2]
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
        """Zero the buffer (a memset: ~4 ms for 128 MiB), as Kafka does; nothing to do if nothing was put."""
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

    def _find_one(self, h1: int, h2: int, pos: int, step: int) -> tuple[int, bool]:
        """Continue one probe sequence from ``pos``: (slot holding the hash, True) or (first empty, False)."""
        w = self._words
        slots = self._slots
        while True:
            i = 3 * pos
            if not w[i + 2]:
                return pos, False
            if w[i] == h1 and w[i + 1] == h2:
                return pos, True
            pos += step
            if pos >= slots:
                pos -= slots

    # --- batches -------------------------------------------------------------------------------------------

    def get_many(self, hashes: Sequence[bytes]) -> list[int]:
        if not hashes:
            return []
        if set(map(len, hashes)) != {HASH_SIZE}:
            raise ValueError(f"every key hash must be {HASH_SIZE} bytes")
        h1, h2 = _split(hashes)
        pos, _ = self._probe(h1, h2)
        # A miss ends on an empty slot, whose word 2 is 0: stored - 1 is then the -1 that means "absent".
        out: list[int] = (self._offcol[pos].astype(np.int64) - 1).tolist()
        return out

    def put_many(self, hashes: Sequence[bytes], offsets: Sequence[int]) -> int:
        """Put ``(hashes[i], offsets[i])`` in order; return how many leading items fit (all, unless full).

        The result equals calling ``put`` for each item and stopping at the first ``OffsetMapFull``.
        """
        _check_batch(hashes, offsets)
        n = len(hashes)
        if n == 0:
            return 0
        offs = _offset_array(offsets)
        _check_offsets(offs)
        h1_all, h2_all = _split(hashes)
        done = 0
        while done < n:
            end = min(n, done + self._window)
            h1, h2, off = h1_all[done:end], h2_all[done:end], offs[done:end]
            pos, found = self._probe(h1, h2)
            room = self._capacity - self._size
            take = end - done
            if room < take:
                # Count every not-found item as a new entry (an upper bound: some may repeat a hash), so the
                # prefix certainly fits; the next round probes again and sees what this one inserted.
                new_so_far = np.cumsum(~found)
                take = int(np.searchsorted(new_so_far, room, side="right"))
                if take == 0:
                    break
            self._apply(h1[:take], h2[:take], off[:take], pos[:take], found[:take])
            done += take
        return done

    def _probe(self, h1: U64, h2: U64) -> tuple[Positions, Mask]:
        """Per item: the slot holding its hash (found) or else the first empty slot of its probe sequence."""
        n = h1.shape[0]
        slots = self._slots
        out_pos: Positions = (h1 % np.uint64(slots)).astype(np.intp)
        steps: Positions = (h2 % np.uint64(slots - 1)).astype(np.intp) + 1
        found: Mask = np.zeros(n, dtype=np.bool_)
        active: Positions = np.arange(n, dtype=np.intp)
        cur, a1, a2, st = out_pos, h1, h2, steps
        table = self._table
        while active.size > self._scalar_tail:
            rows = np.take(table, cur, axis=0)
            empty = rows[:, 2] == 0
            hit = (rows[:, 0] == a1) & (rows[:, 1] == a2) & ~empty
            found[active[hit]] = True
            pending = ~(empty | hit)
            # Resolved items keep the position they were given when they were last advanced.
            active, cur, a1, a2, st = active[pending], cur[pending], a1[pending], a2[pending], st[pending]
            cur += st
            cur[cur >= slots] -= slots
            out_pos[active] = cur
        for j, p, x1, x2, s in zip(
            active.tolist(), cur.tolist(), a1.tolist(), a2.tolist(), st.tolist(), strict=True
        ):
            out_pos[j], found[j] = self._find_one(x1, x2, p, s)
        return out_pos, found

    def _apply(self, h1: U64, h2: U64, off: I64, pos: Positions, found: Mask) -> None:
        """Write a prefix known to fit: claim slots for the new hashes, then store every offset."""
        new = np.flatnonzero(~found)
        slot_of = pos.copy()
        if new.size:
            slot_of[new] = self._claim(h1[new], h2[new], pos[new])
        stored = off.astype(np.uint64) + np.uint64(1)
        col = self._offcol
        # Items with the same hash share a slot. The one with the largest offset (the last: offsets are
        # non-decreasing) must win, and numpy does not promise which of several writes to one index lands.
        # So write, read back, and let the items whose write did not land raise their slot to the maximum.
        col[slot_of] = stored
        lost = np.flatnonzero(col[slot_of] != stored)
        if lost.size:
            np.maximum.at(col, slot_of[lost], stored[lost])
        last = int(off[-1])
        if last > self._latest:
            self._latest = last

    def _claim(self, h1: U64, h2: U64, start: Positions) -> Positions:
        """Give every hash a slot, claiming empty ones for hashes not yet in the map.

        ``start`` is where ``_probe`` found each probe sequence's first empty slot. Items with the same hash
        share ``start`` and move in lockstep, so one of them claims a slot and the others then find it there.
        """
        slots = self._slots
        n = h1.shape[0]
        slot_of: Positions = np.empty(n, dtype=np.intp)
        steps: Positions = (h2 % np.uint64(slots - 1)).astype(np.intp) + 1
        active: Positions = np.arange(n, dtype=np.intp)
        cur, a1, a2, st = start.copy(), h1, h2, steps
        table, c1, c2, coff = self._table, self._h1col, self._h2col, self._offcol
        claimed = 0
        # Nothing has been written since _probe saw every start slot empty: skip the first look.
        empty: Mask = np.ones(n, dtype=np.bool_)
        hit: Mask = np.zeros(n, dtype=np.bool_)
        first = True
        while active.size > self._scalar_tail:
            if not first:
                rows = np.take(table, cur, axis=0)
                empty = rows[:, 2] == 0
                hit = (rows[:, 0] == a1) & (rows[:, 1] == a2) & ~empty
            first = False
            won = np.zeros(active.size, dtype=np.bool_)
            contenders = np.flatnonzero(empty)
            if contenders.size:
                # Several items may want the same empty slot. Each writes its index into the slot's word 0
                # (free while word 2 is 0); the one whose index stays there wins and fills the slot, which
                # overwrites every such mark. Losers stay put and look at the slot again next step.
                at = cur[contenders]
                marks = active[contenders].astype(np.uint64)
                c1[at] = marks
                winners = contenders[c1[at] == marks]
                at = cur[winners]
                c1[at] = a1[winners]
                c2[at] = a2[winners]
                coff[at] = 1  # offset 0 for now; _apply stores the real one
                won[winners] = True
                claimed += winners.size
            resolved = hit | won
            slot_of[active[resolved]] = cur[resolved]
            advance = ~empty & ~hit
            cur = cur + np.where(advance, st, 0)
            cur[cur >= slots] -= slots
            keep = ~resolved
            active, cur, a1, a2, st = active[keep], cur[keep], a1[keep], a2[keep], st[keep]
        w = self._words
        for j, p, x1, x2, s in zip(
            active.tolist(), cur.tolist(), a1.tolist(), a2.tolist(), st.tolist(), strict=True
        ):
            slot, present = self._find_one(x1, x2, p, s)
            if not present:
                i = 3 * slot
                w[i] = x1
                w[i + 1] = x2
                w[i + 2] = 1
                claimed += 1
            slot_of[j] = slot
        self._size += claimed
        return slot_of


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
