"""Object keys of data files: the one place that knows their layout. Generated, never built from user input.

Layout: ``data/l<level>/<48-bit ms timestamp hex><80 random bits hex>.strata``. The timestamp prefix makes a
listing roughly time-ordered, which lets the orphan collector skip recent uploads cheaply; the random part
makes keys from concurrent agents collision-free without coordination.
"""

from __future__ import annotations

import random

from storage.clock import Clock

DATA_PREFIX = "data/"
SUFFIX = ".strata"
# A key is DATA_PREFIX + "l<level>/<name>": this many "/"-separated segments.
_KEY_SEGMENTS = 3


def new_object_key(level: int, clock: Clock, rng: random.Random) -> str:
    ms = clock.now_ms() & ((1 << 48) - 1)
    return f"{DATA_PREFIX}l{level}/{ms:012x}{rng.getrandbits(80):020x}{SUFFIX}"


def key_of(path: str) -> str:
    """The object key at the end of any path or URL naming a data file (``file:///b/data/l0/x.strata``,
    ``s3a://bucket/prefix/data/l0/x.strata``, ...): its last three segments."""
    return "/".join(path.rsplit("/", _KEY_SEGMENTS)[-_KEY_SEGMENTS:])
