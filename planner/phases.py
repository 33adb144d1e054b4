"""The phase hook: instrumentation around the phases of a compaction job ("pass1", "pass2", "seal").

A ``PhaseHook`` is called with a phase's name and the context manager it returns is entered around that
phase. The compaction benchmark uses it for time and RSS per phase; it must not change the run.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

PhaseHook = Callable[[str], AbstractContextManager[object]]


def no_phase_hook(name: str) -> AbstractContextManager[object]:
    return nullcontext()
