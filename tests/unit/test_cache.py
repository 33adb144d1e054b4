"""ObjectCache: byte-bounded LRU of whole files and ranges."""

from __future__ import annotations

from agents.buffer import ProduceBuffer
from agents.cache import ObjectCache


def test_file_serves_any_range_and_counts_hits() -> None:
    cache = ObjectCache(100)
    cache.put_file("a", b"0123456789")
    assert cache.get("a", 2, 5) == b"234"
    assert cache.get("b", 0, 1) is None
    assert (cache.hits, cache.misses, cache.size) == (1, 1, 10)


def test_range_serves_only_what_it_covers() -> None:
    cache = ObjectCache(100)
    cache.put_range("a", 10, b"abcdef")  # bytes [10, 16)
    assert cache.get("a", 11, 13) == b"bc"
    assert cache.get("a", 9, 12) is None
    assert cache.get("a", 14, 17) is None


def test_evicts_least_recently_used_and_never_exceeds_the_bound() -> None:
    cache = ObjectCache(25)
    cache.put_file("a", b"a" * 10)
    cache.put_file("b", b"b" * 10)
    assert cache.get("a", 0, 1) == b"a"  # a is now the most recently used
    cache.put_file("c", b"c" * 10)
    assert cache.size <= 25
    assert cache.get("b", 0, 1) is None
    assert cache.get("a", 0, 1) == b"a"
    assert cache.get("c", 0, 1) == b"c"


def test_oversize_entries_are_not_cached_and_duplicates_count_once() -> None:
    cache = ObjectCache(8)
    cache.put_file("big", b"x" * 9)
    cache.put_range("big", 0, b"x" * 9)
    assert cache.size == 0
    cache.put_file("a", b"1234")
    cache.put_file("a", b"1234")
    assert cache.size == 4


def test_the_cache_gives_way_to_its_owner() -> None:
    # The agent's cache holds only what its produce buffer leaves of the budget, and shrinks as it fills.
    buffer = ProduceBuffer(100)
    cache = ObjectCache(80, room=lambda: buffer.max_bytes - buffer.bytes_held)
    buffer.grew = cache.make_room
    cache.put_file("a", b"a" * 40)
    cache.put_file("b", b"b" * 40)
    assert cache.size == 80  # its own bound: 80 of the 100 free
    held = buffer.reserve(50)
    assert cache.size == 40
    assert cache.get("a", 0, 1) is None
    cache.put_file("c", b"c" * 20)  # only 50 free: b, now the least recently used, goes
    assert cache.get("b", 0, 1) is None
    assert cache.size == 20
    cache.put_file("big", b"x" * 60)  # larger than the room left: not cached at all
    assert cache.get("big", 0, 1) is None
    held.release()
    cache.put_file("d", b"d" * 40)
    assert cache.size == 60
