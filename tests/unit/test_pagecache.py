"""The local store leaves only its last writes in the kernel's page cache (storage/objectstore/pagecache.py).

Residency is read with mincore(2) on a mapping of each file: the test sees what the kernel holds, not what
the module believes it asked for.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

import pytest

from storage.objectstore.local import LocalObjectStore
from storage.objectstore.pagecache import RecentWrites

PAGE = os.sysconf("SC_PAGE_SIZE")
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


def resident_fraction(path: Path) -> float:
    """Share of ``path``'s pages in the page cache, from mincore(2) on a copy-on-write mapping (its pages
    are the file's cached pages until written, and nothing here writes them)."""
    size = path.stat().st_size
    pages = -(-size // PAGE)
    vec = ctypes.create_string_buffer(pages)
    with path.open("rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as m:
        anchor = ctypes.c_char.from_buffer(m)
        try:
            if _libc.mincore(ctypes.addressof(anchor), size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
        finally:
            del anchor  # the mapping cannot close while ctypes holds it
    return sum(b & 1 for b in vec.raw) / pages


def test_only_the_budget_of_recent_writes_stays_cached(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path, page_cache_bytes=3 * 256 * 1024)
    body = os.urandom(256 * 1024)
    for i in range(6):
        store.put(f"k/{i}", body)
    assert store.recent_writes.held == 3 * len(body)
    paths = [tmp_path / "k" / str(i) for i in range(6)]
    dropped = [resident_fraction(p) for p in paths[:3]]
    kept = [resident_fraction(p) for p in paths[3:]]
    assert max(dropped) < 0.1, dropped
    assert min(kept) > 0.9, kept
    # Dropping is advice: the bytes are all still there.
    assert all(store.get(f"k/{i}") == body for i in range(6))


def test_a_file_deleted_before_its_turn_is_skipped(tmp_path: Path) -> None:
    recent = RecentWrites(budget=10)
    gone = tmp_path / "gone"
    gone.write_bytes(b"x" * 8)
    recent.written(gone, 8)
    gone.unlink()
    kept = tmp_path / "kept"
    kept.write_bytes(b"y" * 8)
    recent.written(kept, 8)  # evicts "gone", which no longer exists
    assert recent.held == 8
    assert kept.read_bytes() == b"y" * 8


def test_a_zero_budget_keeps_nothing_and_a_negative_one_is_refused(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path, page_cache_bytes=0)
    store.put("a", os.urandom(128 * 1024))
    assert store.recent_writes.held == 0
    assert resident_fraction(tmp_path / "a") < 0.1
    with pytest.raises(ValueError):
        RecentWrites(budget=-1)


def test_reads_leave_the_page_cache_alone(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path, page_cache_bytes=1 << 30)
    body = os.urandom(512 * 1024)
    store.put("a", body)
    assert store.get("a") == body
    assert store.get_range("a", 0, 1024) == body[:1024]
    assert resident_fraction(tmp_path / "a") > 0.9
