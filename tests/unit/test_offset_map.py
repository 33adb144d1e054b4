"""The compaction dedup map: both implementations against a dict model, fullness, clear, and the key hash."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from siphashc import siphash

from planner.offset_map import (
    BYTES_PER_ENTRY,
    DEFAULT_MEMORY_BYTES,
    FakeOffsetMap,
    KeyHasher,
    OffsetMap,
    SkimpyOffsetMap,
)
from storage.errors import OffsetMapFull, StrataError
from tests.examples import examples

FAST = settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])


class ScalarOffsetMap(SkimpyOffsetMap):
    """The batch calls done one key at a time by the Python ``put``/``get``: the reference of the C loops."""

    def put_many(self, hashes: list[bytes], offsets: list[int]) -> int:  # type: ignore[override]
        return FakeOffsetMap.put_many(self, hashes, offsets)  # type: ignore[arg-type]

    def get_many(self, hashes: list[bytes]) -> list[int]:  # type: ignore[override]
        return [self.get(h) for h in hashes]


def pool_of_hashes(slots: int, n: int, seed: int) -> list[bytes]:
    """Random hashes, the all-zero hash, and groups sharing a whole probe sequence in a map of ``slots``."""
    rng = random.Random(seed)
    pool = [bytes(16)]
    for group in range(4):
        h1, h2 = rng.randrange(slots), rng.randrange(slots - 1)
        for k in range(6):
            # Same h1 mod slots and h2 mod (slots - 1): same home and step, different hashes.
            pool.append(
                (h1 + k * slots).to_bytes(8, "little")
                + (h2 + (k + group) * (slots - 1)).to_bytes(8, "little")
            )
    pool += [rng.randbytes(16) for _ in range(n - len(pool))]
    assert len(set(pool)) == len(pool)
    return pool[:n]


Make = Callable[[int], OffsetMap]


def skimpy(memory: int) -> OffsetMap:
    return SkimpyOffsetMap(memory)


def scalar(memory: int) -> OffsetMap:
    return ScalarOffsetMap(memory)


def fake(memory: int) -> OffsetMap:
    return FakeOffsetMap(SkimpyOffsetMap(memory).capacity)


IMPLEMENTATIONS = [skimpy, scalar, fake]


class Model:
    """What the map must do, written as plainly as possible."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.entries: dict[bytes, int] = {}
        self.latest = -1

    def put(self, key_hash: bytes, offset: int) -> bool:
        if key_hash not in self.entries and len(self.entries) >= self.capacity:
            return False
        self.entries[key_hash] = offset
        self.latest = max(self.latest, offset)
        return True

    def put_many(self, hashes: list[bytes], offsets: list[int]) -> int:
        for i, (h, o) in enumerate(zip(hashes, offsets, strict=True)):
            if not self.put(h, o):
                return i
        return len(hashes)


op = st.one_of(
    st.tuples(st.just("put"), st.integers(0, 159)),
    st.tuples(st.just("get"), st.integers(0, 159)),
    st.tuples(st.just("put_many"), st.lists(st.integers(0, 159), max_size=400)),
    st.tuples(st.just("get_many"), st.lists(st.integers(0, 159), max_size=100)),
    st.tuples(st.just("clear"), st.just(0)),
)


@pytest.mark.parametrize("make", IMPLEMENTATIONS)
@FAST
@given(memory=st.sampled_from([24 * 61, 24 * 1024]), ops=st.lists(op, max_size=40))
def test_matches_a_dict_model(make: Make, memory: int, ops: list[tuple[str, object]]) -> None:
    m = make(memory)
    pool = pool_of_hashes(SkimpyOffsetMap(memory).slots, 160, seed=memory)
    model = Model(m.capacity)
    offset = 0
    for name, arg in ops:
        if name == "put":
            assert isinstance(arg, int)
            if model.put(pool[arg], offset):
                m.put(pool[arg], offset)
            else:
                with pytest.raises(OffsetMapFull):
                    m.put(pool[arg], offset)
            offset += 1
        elif name == "get":
            assert isinstance(arg, int)
            assert m.get(pool[arg]) == model.entries.get(pool[arg], -1)
        elif name == "put_many":
            assert isinstance(arg, list)
            hashes = [pool[i] for i in arg]
            offsets = list(range(offset, offset + len(hashes)))
            assert m.put_many(hashes, offsets) == model.put_many(hashes, offsets)
            offset += len(hashes)
        elif name == "get_many":
            assert isinstance(arg, list)
            assert m.get_many([pool[i] for i in arg]) == [model.entries.get(pool[i], -1) for i in arg]
        else:
            m.clear()
            model = Model(m.capacity)
        assert m.size == len(model.entries)
        assert m.latest_offset == model.latest
    assert m.get_many(pool) == [model.entries.get(h, -1) for h in pool]
    assert [m.get(h) for h in pool] == [model.entries.get(h, -1) for h in pool]


@pytest.mark.parametrize("make", IMPLEMENTATIONS)
def test_large_batches_with_repeats_match_the_fake(make: Make) -> None:
    rng = random.Random(7)
    m, reference = make(24 * 4096), FakeOffsetMap(SkimpyOffsetMap(24 * 4096).capacity)
    keys = [rng.randbytes(16) for _ in range(5000)]
    offset = 0
    for _ in range(12):
        hashes = [rng.choice(keys) for _ in range(rng.randrange(1, 3000))]
        offsets = list(range(offset, offset + len(hashes)))
        offset += len(hashes)
        assert m.put_many(hashes, offsets) == reference.put_many(hashes, offsets)
        assert m.size == reference.size
    assert m.size == m.capacity  # it filled up on the way
    assert m.get_many(keys) == reference.get_many(keys)


@pytest.mark.parametrize("make", IMPLEMENTATIONS)
def test_a_full_map_still_updates_hashes_it_holds(make: Make) -> None:
    m = make(24 * 61)
    hashes = pool_of_hashes(61, m.capacity + 1, seed=1)
    assert m.put_many(hashes[:-1], range(m.capacity)) == m.capacity
    assert m.size == m.capacity
    with pytest.raises(OffsetMapFull) as info:
        m.put(hashes[-1], 1000)
    assert isinstance(info.value, StrataError)
    assert (info.value.size, info.value.capacity) == (m.capacity, m.capacity)
    assert m.get(hashes[-1]) == -1
    assert m.latest_offset == m.capacity - 1  # a refused put changes nothing
    m.put(hashes[0], 2000)
    assert m.get(hashes[0]) == 2000
    assert m.put_many([hashes[1], hashes[2]], [2001, 2002]) == 2
    assert (m.get(hashes[1]), m.get(hashes[2]), m.size, m.latest_offset) == (2001, 2002, m.capacity, 2002)


@pytest.mark.parametrize("make", IMPLEMENTATIONS)
def test_put_many_stops_at_the_first_new_hash_that_does_not_fit(make: Make) -> None:
    m = make(24 * 61)
    hashes = pool_of_hashes(61, m.capacity + 2, seed=2)
    old, spare = hashes[: m.capacity - 1], hashes[m.capacity - 1 :]
    m.put_many(old, range(len(old)))
    # Room for one more: new, update, new (refused), then an update that must not be applied either.
    batch = [spare[0], old[0], spare[1], old[1], spare[2]]
    assert m.put_many(batch, [100, 101, 102, 103, 104]) == 2
    assert [m.get(h) for h in batch] == [100, 101, -1, 1, -1]
    assert (m.size, m.latest_offset) == (m.capacity, 101)


@pytest.mark.parametrize("make", IMPLEMENTATIONS)
def test_clear_forgets_everything_and_the_map_is_reusable(make: Make) -> None:
    m = make(24 * 1024)
    hashes = pool_of_hashes(1021, m.capacity, seed=3)
    assert m.put_many(hashes, range(len(hashes))) == m.capacity
    m.clear()
    assert (m.size, m.latest_offset, m.utilization) == (0, -1, 0.0)
    assert m.get_many(hashes) == [-1] * len(hashes)
    m.clear()  # clearing an empty map is fine
    assert m.put_many(hashes, range(10, 10 + len(hashes))) == m.capacity
    assert m.get_many(hashes) == list(range(10, 10 + len(hashes)))


@pytest.mark.parametrize("make", IMPLEMENTATIONS)
def test_latest_offset_is_the_largest_offset_put(make: Make) -> None:
    m = make(24 * 1024)
    a, b = pool_of_hashes(1021, 2, seed=4)
    assert m.latest_offset == -1
    m.put(a, 5)
    m.put(b, 9)
    m.put(a, 7)  # puts need not be in offset order; latest_offset stays the largest
    assert (m.latest_offset, m.get(a), m.get(b)) == (9, 7, 9)
    assert m.put_many([b, a], [20, 30]) == 2
    assert m.latest_offset == 30


@pytest.mark.parametrize("make", IMPLEMENTATIONS)
def test_bad_arguments_are_refused(make: Make) -> None:
    m = make(24 * 1024)
    h = bytes(range(16))
    with pytest.raises(ValueError, match="16 bytes"):
        m.put(h[:15], 1)
    with pytest.raises(ValueError, match="16 bytes"):
        m.get(h + b"x")
    with pytest.raises(ValueError, match=">= 0"):
        m.put(h, -1)
    with pytest.raises(ValueError, match="non-decreasing"):
        m.put_many([h, h[::-1]], [2, 1])
    with pytest.raises(ValueError, match="offsets"):
        m.put_many([h], [1, 2])
    with pytest.raises(ValueError, match="16 bytes"):
        m.put_many([h[:15] + b"ab", h[:15]], [1, 2])
    assert (m.size, m.latest_offset) == (0, -1)


def test_slots_capacity_and_memory() -> None:
    m = SkimpyOffsetMap()
    assert m.memory_bytes == BYTES_PER_ENTRY * m.slots <= DEFAULT_MEMORY_BYTES
    assert m.slots > DEFAULT_MEMORY_BYTES // BYTES_PER_ENTRY - 100
    assert m.capacity == int(m.slots * 0.9)
    small = SkimpyOffsetMap(24 * 1024, load_factor=0.5)
    assert (small.slots, small.capacity, small.memory_bytes) == (1021, 510, 1021 * 24)
    assert all(small.slots % p for p in range(2, 32))
    fake_map = FakeOffsetMap(10)
    assert (fake_map.slots, fake_map.capacity, fake_map.memory_bytes) == (10, 10, 0)
    for bad in (0, 24, 24 * 2):
        with pytest.raises(ValueError, match="too small"):
            SkimpyOffsetMap(bad)
    for load_factor in (0.0, 1.0):
        with pytest.raises(ValueError, match="load_factor"):
            SkimpyOffsetMap(24 * 1024, load_factor)


def test_a_small_map_fills_to_capacity_one_put_at_a_time() -> None:
    m = SkimpyOffsetMap(24 * 1024)
    hasher = KeyHasher.random(random.Random(5))
    hashes = [hasher.hash(b"key-%d" % i) for i in range(m.capacity + 1)]
    for i, h in enumerate(hashes[:-1]):
        m.put(h, i)
    assert (m.size, m.utilization) == (918, 918 / 1021)
    with pytest.raises(OffsetMapFull):
        m.put(hashes[-1], m.capacity)
    assert [m.get(h) for h in hashes] == [*range(m.capacity), -1]


def test_both_implementations_satisfy_the_protocol() -> None:
    assert isinstance(SkimpyOffsetMap(24 * 1024), OffsetMap)
    assert isinstance(FakeOffsetMap(1), OffsetMap)


def test_key_hasher_is_siphash_2_4_under_two_keys() -> None:
    secret = bytes(range(32))
    hasher = KeyHasher(secret)
    # SipHash-2-4's reference vectors (key 00..0f, messages b"" and 00..0e) for h1 (secret[:16]).
    assert hasher.hash(b"")[:8] == (0x726FDB47DD0E0E31).to_bytes(8, "little")
    assert hasher.hash(bytes(range(15)))[:8] == (0xA129CA6149BE45E5).to_bytes(8, "little")
    expected = siphash(secret[:16], b"k").to_bytes(8, "little") + siphash(secret[16:], b"k").to_bytes(
        8, "little"
    )
    assert hasher.hash(b"k") == expected == KeyHasher(secret).hash(b"k")
    assert hasher.hash(b"") != hasher.hash(b"\x00")
    assert hasher.hash_many([b"k", b"k", b""]) == [expected, expected, hasher.hash(b"")]
    assert KeyHasher(secret[::-1]).hash(b"k") != expected
    for bad in (b"", bytes(16), bytes(31), bytes(33), bytes(64)):
        with pytest.raises(ValueError, match="secret"):
            KeyHasher(bad)


@FAST
@given(st.binary(min_size=32, max_size=32), st.binary(max_size=300))
def test_key_hasher_matches_an_independent_siphash(secret: bytes, key: bytes) -> None:
    """siphashc (another C implementation) computes both words."""
    h = KeyHasher(secret).hash(key)
    assert h == siphash(secret[:16], key).to_bytes(8, "little") + siphash(secret[16:], key).to_bytes(
        8, "little"
    )


def test_random_key_hashers_come_from_the_injected_rng() -> None:
    assert KeyHasher.random(random.Random(1)).hash(b"k") == KeyHasher.random(random.Random(1)).hash(b"k")
    rng = random.Random(1)
    first, second = KeyHasher.random(rng), KeyHasher.random(rng)
    assert first.hash(b"k") != second.hash(b"k")
    assert len(first.hash(b"k")) == 16
