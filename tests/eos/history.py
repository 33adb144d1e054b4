"""The history of an exactly-once run: what every client process asked the log service, and what it answered.

A history is a list of operations in the style of Jepsen's ``jepsen.tests.kafka``. Each client process (a
worker, a copier, the final drain) appends its own events to its own JSON-lines file, one event a line, so
that no two processes share a file and a SIGKILLed process leaves every line it finished behind (each line
is written with one ``write`` and flushed). ``load_history`` merges the files into one list of ``Op``.

One line is one event::

    {"process": "w3", "type": "invoke", "f": "txn", "time": 812345678901, "value": {...}}

* ``process``: who acted. A process runs one operation at a time: an ``invoke`` is followed by exactly one
  completion (``ok``, ``fail`` or ``info``) of the same ``f`` before its next ``invoke``. A process that
  dies between them leaves an invoke alone; the loader completes it with ``info`` (outcome unknown).
* ``type``: ``invoke``; ``ok`` (it happened: a transaction committed, a send was acknowledged); ``fail``
  (it definitely did not happen: a transaction aborted, a send was refused); ``info`` (unknown: a commit
  that timed out, a producer abandoned).
* ``time``: ``time.monotonic_ns()``. CLOCK_MONOTONIC is one clock for every process of the host, so the
  times of different processes compare; the checker's real-time rule (precommitted read) relies on that.
* ``f`` and ``value``:
  * ``txn``: ``{"mops": [...], "end": "commit" | "abort" | null, "end_at": ns | null}``; ``end_at`` is
    when commit or abort was invoked, null if never (the producer was abandoned); ``"zombie": true`` marks a
    transaction tried on a producer after a later incarnation fenced it. Its micro-ops:
    ``{"f": "send", "topic", "partition", "key", "value", "offset"}`` (offset null until acknowledged);
    ``{"f": "poll", "at": ns, "records": [[topic, partition, offset, key, value], ...]}`` (``at`` when the
    poll returned); ``{"f": "send_offsets", "group", "offsets": [[topic, partition, offset], ...]}``.
  * ``send`` and ``poll``: one micro-op outside any transaction, as its ``mops``' only element.
  * ``drain``: the final read of every partition from offset 0: one poll micro-op, plus ``"ends"``
    (``[[topic, partition, end_offset], ...]`` the drain reached) and ``"complete"`` (every partition read
    up to its end). A complete drain sees every committed record; the checker's lost-write needs it.
  * ``crash``: an ``info`` event alone (no invoke): the process abandoned its producer here.

Values are integers unique in the run (a worker draws them from its own range), so a value names the one
write that produced it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
TXN, SEND, POLL, DRAIN, CRASH = "txn", "send", "poll", "drain", "crash"
SEND_OFFSETS = "send_offsets"
COMPLETIONS = (OK, FAIL, INFO)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Record:
    """One record a poll returned."""

    topic: str
    partition: int
    offset: int
    key: str | None
    value: int

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass
class Send:
    topic: str
    partition: int
    key: str | None
    value: int
    offset: int | None = None

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass
class Poll:
    at: int
    records: list[Record] = field(default_factory=list)


@dataclass
class SendOffsets:
    group: str
    offsets: list[tuple[str, int, int]]


Mop = Send | Poll | SendOffsets


@dataclass
class Op:
    """One operation: its invocation and its completion, paired."""

    index: int
    process: str
    f: str
    type: str  # the completion's: ok, fail or info
    invoke_time: int
    complete_time: int
    mops: list[Mop]
    end: str | None = None
    end_at: int | None = None
    ends: dict[TopicPartition, int] = field(default_factory=dict)
    complete: bool = False
    zombie: bool = False  # sent by a producer a later incarnation had fenced

    def sends(self) -> list[Send]:
        return [m for m in self.mops if isinstance(m, Send)]

    def polls(self) -> list[Poll]:
        return [m for m in self.mops if isinstance(m, Poll)]


# ---- encoding -------------------------------------------------------------------------------------------


def record_json(r: Record) -> list[Any]:
    return [r.topic, r.partition, r.offset, r.key, r.value]


def mop_json(m: Mop) -> dict[str, Any]:
    if isinstance(m, Send):
        return {"f": SEND, "topic": m.topic, "partition": m.partition, "key": m.key, "value": m.value,
                "offset": m.offset}  # fmt: skip
    if isinstance(m, Poll):
        return {"f": POLL, "at": m.at, "records": [record_json(r) for r in m.records]}
    return {"f": SEND_OFFSETS, "group": m.group, "offsets": [list(o) for o in m.offsets]}


def mop_from_json(d: dict[str, Any]) -> Mop:
    if d["f"] == SEND:
        return Send(d["topic"], d["partition"], d["key"], d["value"], d["offset"])
    if d["f"] == POLL:
        return Poll(d["at"], [Record(t, p, o, k, v) for t, p, o, k, v in d["records"]])
    if d["f"] == SEND_OFFSETS:
        return SendOffsets(d["group"], [(t, p, o) for t, p, o in d["offsets"]])
    raise ValueError(f"unknown micro-op {d['f']!r}")


class HistoryWriter:
    """Appends one process's events to its own file, a flushed line each, so a SIGKILL loses none it wrote."""

    def __init__(self, path: Path, process: str) -> None:
        self.process = process
        self._file: IO[str] = path.open("a", encoding="utf-8")

    def event(self, type_: str, f: str, value: Any) -> None:
        line = {"process": self.process, "type": type_, "f": f, "time": time.monotonic_ns(), "value": value}
        self._file.write(json.dumps(line, separators=(",", ":")) + "\n")
        self._file.flush()

    def txn_value(
        self, mops: list[Mop], end: str | None, end_at: int | None, zombie: bool = False
    ) -> dict[str, Any]:
        return {"mops": [mop_json(m) for m in mops], "end": end, "end_at": end_at, "zombie": zombie}

    def close(self) -> None:
        self._file.close()


# ---- loading --------------------------------------------------------------------------------------------


def read_events(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every event of every file, in time order (a process's own events keep their file order)."""
    events: list[tuple[int, int, int, dict[str, Any]]] = []
    for n, path in enumerate(sorted(paths)):
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                # Only a process killed mid-write leaves a partial line, and only as its last.
                continue
            events.append((event["time"], n, line_no, event))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    return [e[3] for e in events]


def _op(index: int, invoke: dict[str, Any], completion: dict[str, Any]) -> Op:
    value = completion["value"] if completion["value"] is not None else invoke["value"]
    value = value or {}
    op = Op(
        index=index,
        process=invoke["process"],
        f=invoke["f"],
        type=completion["type"],
        invoke_time=invoke["time"],
        complete_time=completion["time"],
        mops=[mop_from_json(m) for m in value.get("mops", [])],
        end=value.get("end"),
        end_at=value.get("end_at"),
        ends={(t, p): o for t, p, o in value.get("ends", [])},
        complete=bool(value.get("complete", False)),
        zombie=bool(value.get("zombie", False)),
    )
    return op


def ops_from_events(events: Iterable[dict[str, Any]]) -> list[Op]:
    """Pairs each process's invoke with its completion; an invoke left alone completes as ``info``.

    A ``crash`` (a completion without invoke, inside another operation) is an op of its own, whose invoke
    and completion are the same event.
    """
    pending: dict[str, dict[str, Any]] = {}
    ops: list[Op] = []
    last_time = 0
    for event in events:
        last_time = max(last_time, event["time"])
        process = event["process"]
        if event["type"] == INVOKE:
            if process in pending:
                raise ValueError(f"process {process} invoked {event['f']} with {pending[process]['f']} open")
            pending[process] = event
            continue
        if event["f"] == CRASH:
            # A crash happens inside the operation it interrupts, and is an op of its own.
            ops.append(_op(len(ops), event, event))
            continue
        invoke = pending.pop(process, None)
        if invoke is None:
            raise ValueError(f"process {process} completed {event['f']} it never invoked")
        if invoke["f"] != event["f"]:
            raise ValueError(f"process {process} completed {event['f']} while {invoke['f']} was open")
        ops.append(_op(len(ops), invoke, event))
    for invoke in pending.values():
        ops.append(_op(len(ops), invoke, {**invoke, "type": INFO, "time": last_time, "value": None}))
    return ops


def load_history(directory: Path) -> list[Op]:
    """The merged history of every ``*.jsonl`` file in ``directory``."""
    return ops_from_events(read_events(directory.glob("*.jsonl")))


def iter_reads(ops: Iterable[Op]) -> Iterator[tuple[Op, Poll, Record]]:
    """Every record any poll (drain included) returned, with its poll and operation."""
    for op in ops:
        for poll in op.polls():
            for record in poll.records:
                yield op, poll, record
