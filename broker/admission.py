"""Produce admission on a Kafka connection: the part of ``Connection`` (broker/connection.py) that puts a
Produce request in the agent's buffer in arrival order and keeps the listener told whether this client
produces and can send no more (broker/waiting.py).

A request whose topics are all in the agent's topic cache, and which holds no compressed batch, is admitted
at once, before the connection looks at its next frame; with a topic that validates schemas, once its
batches passed their checks on the loop from the schema cache alone. Otherwise the connection stops reading
frames (``ADMITTING``) until its topics are loaded and its compressed batches (or its batches for the schema
checks the cache could not answer) checked in the listener's check threads (broker/batch_checks.py), so a
connection's produce requests still enter the buffer in the order they were sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from agents.buffer import Reservation
from broker import waiting
from broker.answers import Answers, Slot
from broker.context import BrokerContext
from broker.handlers.produce import (
    PendingAnswer,
    Topics,
    admission_view,
    admit_produce,
    check_off_loop,
    check_on_loop,
    load_topics,
    validates_schemas,
)
from broker.produce_codec import ProduceRequest

ADMITTING = "admitting"  # a Produce request waits for its topics, or for its batches' checks


class ProduceAdmission:
    """Mixed into ``Connection``, which owns the attributes and the stall and task methods below."""

    ctx: BrokerContext
    _answers: Answers
    _loop: asyncio.AbstractEventLoop
    _lost: bool
    _produce_waiting: int
    _send_limit: int
    _wait_state: tuple[bool, bool]

    def _stall(self, reason: str) -> None:
        raise NotImplementedError

    def _unstall(self, reason: str) -> None:
        raise NotImplementedError

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        raise NotImplementedError

    def _admit_produce(self, request: ProduceRequest, reservation: Reservation) -> None:
        slot = self._answers.new_slot()
        topics, off_loop, validating = admission_view(self.ctx, request)
        if topics is not None and not off_loop:
            checked = None
            if validating:
                checked = check_on_loop(self.ctx, request, topics)
                off_loop = checked is None  # a schema the cache cannot answer for: read it off the loop
            if not off_loop:
                try:
                    pending = admit_produce(self.ctx, request, reservation, topics, slot, checked)
                    self._admitted(slot, request, pending)
                finally:
                    reservation.release()  # whatever the admitted partitions did not consume
                return
        # A topic to load, or batches to check off the loop, first: later frames wait, so produce requests
        # keep their order.
        self._stall(ADMITTING)
        self._spawn(self._admit_produce_later(request, reservation, slot, topics, off_loop))

    async def _admit_produce_later(
        self,
        request: ProduceRequest,
        reservation: Reservation,
        slot: Slot,
        topics: Topics | None,
        off_loop: bool,
    ) -> None:
        try:
            if topics is None:
                topics = await load_topics(self.ctx, request)
            if off_loop or validates_schemas(topics):
                checked = await check_off_loop(self.ctx, request, topics)
            else:
                checked = None
            if not self._lost:
                pending = admit_produce(self.ctx, request, reservation, topics, slot, checked)
                self._admitted(slot, request, pending)
        finally:
            reservation.release()
        self._unstall(ADMITTING)

    def _admitted(self, slot: Slot, request: ProduceRequest, pending: PendingAnswer | None) -> None:
        """A waiting Produce answer gets its deadline: the request's timeout from now."""
        if pending is None or slot.ready:
            return
        slot.pending = pending
        slot.deadline = self._loop.time() + max(request.timeout_ms, 1) / 1000
        self._answers.arm(slot.deadline)
        slot.produce = True
        self._produce_waiting += 1
        if pending.idempotent:
            self._send_limit = min(self._send_limit, waiting.IDEMPOTENT_MAX_IN_FLIGHT)
        self._report_waiting()

    def _report_waiting(self) -> None:
        """Tell the listener's ``ProducerWaits`` whether this connection produces, and can send no more."""
        producing = self._produce_waiting > 0 and not self._lost
        answers = self._answers
        blocked = producing and len(answers.slots) - answers.made >= self._send_limit
        state = (producing, blocked)
        if state != self._wait_state:
            before, self._wait_state = self._wait_state, state
            self.ctx.producer_waits.change(before, state, self.ctx.agent)

    def produce_answered(self) -> None:
        self._produce_waiting -= 1
        self._report_waiting()
