"""A connection's answers, written in request order: the ordered answer queue of broker/connection.py.

Every request takes a ``Slot`` when it is read; its answer fills the slot whenever it is made (a handler's
task, a Produce request's flush, a SASL step), and answers leave from the head of the queue only, as
kafka-python and aiokafka require (they close the connection on a correlation id out of order).

- Answers that became ready in one turn of the event loop are written together, in one transport write;
  once ``WRITE_BATCH`` are ready they go out at once, so a flush settling thousands of requests in one
  burst answers as it goes.
- While the transport's write buffer is over its high-water mark (``WRITE_HIGH``), no more answers are
  handed to it: they wait, counted as unanswered, so the connection's reading pauses too once its
  unanswered requests reach ``max_inflight_per_connection``.
- A Fetch answer's budget grant (broker/budget.py) goes back once the transport has taken its bytes below
  the high-water mark: at once if the write left it below, else when the transport resumes writing.
- A Produce answer waiting for its flush has a deadline, its request's timeout from admission; once it
  passes, the answer is given as it stands (``PendingAnswer.expire``). One timer serves the connection,
  armed for the earliest deadline, not one per request.

The queue tells its connection (``Reader``) when the unanswered requests reach the limit, when a Produce
answer that waited for its flush is made, and after each write, so that the connection can resume reading
and close once nothing is owed.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Protocol

from broker.budget import Answer, Framed
from broker.handlers.produce import PendingAnswer

# The transport's write buffer limits: above HIGH no more answers are handed over; grants of answers
# written above it are returned once it drains below LOW.
WRITE_HIGH = 256 * 1024
WRITE_LOW = 64 * 1024

# Answers written together at most; see Answers.fill.
WRITE_BATCH = 64

# Answers joined into one transport write at most.
_JOIN = 1024


class Reader(Protocol):
    """What the queue tells its connection (broker/connection.py)."""

    def inflight_limit(self) -> None:
        """As many requests are unanswered as the connection allows: stop reading."""

    def produce_answered(self) -> None:
        """A Produce answer that waited for its flush (``Slot.produce``) was made."""

    def answers_written(self) -> None:
        """Answers at the head were written: the queue may be short enough to read again, or empty."""


class Slot:
    """One request's place in the answer order; a waiting Produce answer's expiry and deadline."""

    __slots__ = ("answer", "deadline", "pending", "produce", "queue", "ready")

    def __init__(self, queue: Answers) -> None:
        self.queue = queue
        self.answer: Answer = None
        self.ready = False
        self.pending: PendingAnswer | None = None
        self.deadline = 0.0
        self.produce = False  # a Produce request waiting for its flush (counted by the connection)

    def __call__(self, answer: Answer) -> None:
        """The request's answer is ready (None: nothing is sent)."""
        self.queue.fill(self, answer)


class Answers:
    """The slots of a connection's unanswered requests, oldest first, and the writer that empties them."""

    def __init__(self, reader: Reader, limit: int) -> None:
        self._reader = reader
        self._limit = limit  # max_inflight_per_connection
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.slots: deque[Slot] = deque()
        self.made = 0  # answers made and not yet handed to the transport
        self.lost = False
        self._write_scheduled = False
        self._write_paused = False
        self._held: list[Framed] = []  # written above the high-water mark: grants not yet returned
        self._deadline_timer: asyncio.TimerHandle | None = None

    def attach(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(high=WRITE_HIGH, low=WRITE_LOW)

    def drop(self) -> None:
        """The connection is lost: every grant still held goes back, and nothing more is written."""
        self.lost = True
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        for slot in self.slots:
            if isinstance(slot.answer, Framed):
                slot.answer.release()
        self.slots.clear()
        self.release_held()

    def new_slot(self) -> Slot:
        slot = Slot(self)
        self.slots.append(slot)
        if len(self.slots) >= self._limit:
            self._reader.inflight_limit()
        return slot

    def fill(self, slot: Slot, answer: Answer) -> None:
        if self.lost:
            if isinstance(answer, Framed):
                answer.release()
            return
        slot.answer, slot.ready, slot.pending = answer, True, None
        self.made += 1
        if slot.produce:
            slot.produce = False
            self._reader.produce_answered()
        if self.slots and self.slots[0].ready:
            if self.made >= WRITE_BATCH:
                # A flush settles thousands of requests in one burst: answers go out every WRITE_BATCH
                # as they are made, instead of all after the burst.
                self.write_ready()
            else:
                self.schedule_write()

    def schedule_write(self) -> None:
        if not self._write_scheduled:
            self._write_scheduled = True
            self._loop.call_soon(self.write_ready)

    def write_ready(self) -> None:
        """Write every answer that is ready at the head of the order, in one call."""
        self._write_scheduled = False
        transport = self.transport
        if self.lost or transport is None or transport.is_closing():
            return
        out: list[bytes] = []
        written: list[Framed] = []
        slots = self.slots
        while slots and slots[0].ready and not self._write_paused:
            answer = slots.popleft().answer
            self.made -= 1
            if answer is None:
                continue
            if isinstance(answer, Framed):
                out.append(answer.data)
                written.append(answer)
            else:
                out.append(answer)
            if len(out) >= _JOIN:
                self._write(out, written)
                out, written = [], []
        if out:
            self._write(out, written)
        self._reader.answers_written()

    def _write(self, out: list[bytes], written: list[Framed]) -> None:
        assert self.transport is not None
        self.transport.write(out[0] if len(out) == 1 else b"".join(out))
        # write() may call pause_writing: then the bytes of these answers still sit in the transport.
        if self._write_paused:
            self._held.extend(written)
        else:
            for answer in written:
                answer.release()

    def release_held(self) -> None:
        held, self._held = self._held, []
        for answer in held:
            answer.release()

    # --- deadlines of Produce answers waiting for their flush ---------------------------------------------
    def arm(self, deadline: float) -> None:
        """Have ``_expire`` run by ``deadline``. A client's requests share a timeout, so the timer armed for
        the oldest one is nearly always early enough and is left alone."""
        timer = self._deadline_timer
        if timer is not None:
            if timer.when() <= deadline:
                return
            timer.cancel()
        self._deadline_timer = self._loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        """Answer every request whose timeout has passed, then arm for the next deadline: one timer per
        connection (answers still go out in request order)."""
        self._deadline_timer = None
        now = self._loop.time()
        later = []
        for slot in list(self.slots):
            pending = slot.pending
            if slot.ready or pending is None:
                continue
            if slot.deadline <= now:
                pending.expire()
            else:
                later.append(slot.deadline)
        if later:
            self.arm(min(later))

    # --- the transport's flow control (asyncio.Protocol's pause_writing and resume_writing) ------------
    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self.release_held()
        self.schedule_write()
