"""Injected time. No Strata logic reads wall time or sleeps directly; it goes through a Clock."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (record timestamps, retention, grace periods)."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; only differences are meaningful (timeouts, flush timers)."""
        ...

    def sleep(self, seconds: float) -> None: ...

    async def asleep(self, seconds: float) -> None: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    async def asleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class ManualClock:
    """A clock that moves only when told to. ``sleep`` advances it instead of waiting."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._lock = threading.Lock()
        self._ms = start_ms
        self._mono = 0.0

    def now_ms(self) -> int:
        with self._lock:
            return self._ms

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._ms += int(seconds * 1000)
            self._mono += seconds

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    async def asleep(self, seconds: float) -> None:
        self.advance(seconds)
        await asyncio.sleep(0)


class SkewedClock:
    """Real time, plus a wall-clock offset a test can move forward.

    Timers (monotonic, sleeps) run in real time, so a running agent still flushes on schedule, while
    retention, compaction lags, delete horizons and grace periods see a wall clock that ``advance`` jumps.
    """

    def __init__(self, base: Clock | None = None) -> None:
        self._base = base or SystemClock()
        self._lock = threading.Lock()
        self._skew_ms = 0

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._skew_ms += int(seconds * 1000)

    def now_ms(self) -> int:
        with self._lock:
            return self._base.now_ms() + self._skew_ms

    def monotonic(self) -> float:
        return self._base.monotonic()

    def sleep(self, seconds: float) -> None:
        self._base.sleep(seconds)

    async def asleep(self, seconds: float) -> None:
        await self._base.asleep(seconds)
