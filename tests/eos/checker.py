"""The exactly-once checker: a Python port of the checks of Jepsen's ``jepsen.tests.kafka`` that matter to
transactions at read_committed, over a history of ``tests.eos.history``.

Definitions (a *value* names its one write; *committed* means its operation completed ``ok``):

* ``duplicate``: one value at two offsets (acknowledged or read), or read at two different offsets.
* ``inconsistent-offsets``: two different values at one offset of one partition.
* ``G1a`` (aborted read): any poll returned a value whose operation definitely failed (a transaction
  aborted, on purpose or by error, or a producer fenced before it could commit).
* ``precommitted-read`` (read of uncommitted data): a poll returned a value before its transaction's commit
  was invoked, or a value whose transaction never invoked a commit. At read_committed nothing is visible
  before the commit is asked for; the rule compares times of different processes on one host's
  CLOCK_MONOTONIC.
* ``phantom-read``: a poll returned a value no operation ever wrote.
* ``lost-write``: a committed value below the end the complete drain reached in its partition, which the
  drain did not return. The drain is complete (position = end in every partition), so this is stronger than
  Jepsen's (which can only trust offsets below the highest one polled).
* ``unseen``: a committed value the drain never reached (at or past its end): a liveness failure.
* ``incomplete-drain``: the history has no drain that reached every partition's end; lost-write is then
  undecidable, so this is an anomaly in its own right.
* ``torn-transaction``: a transaction (any outcome) with some but not all of its sent values in the drain.
* ``nonmonotonic-poll``: one consumer (a process; assign mode, so it never rewinds unless it says so) read an
  offset of a partition at or before one it had read before.
* ``poll-skip``: one consumer read offset a then b > a + 1 of a partition, and the drain holds a committed
  record strictly between them. Aborted records and transaction markers also leave gaps; those are allowed.
* ``zombie-commit``: a transaction of a fenced producer (a later incarnation with its transactional.id has
  initialised) committed: fencing failed.
* ``G1c``: a cycle of write-read edges between operations (T1 wrote a value T2 read). Not allowed at
  read_committed, where a transaction only reads what committed before it.

``check`` returns a ``Verdict``; ``tests.eos.copycheck`` checks a copier's output against its input.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tests.eos.cycles import find_cycle, strongly_connected
from tests.eos.history import DRAIN, FAIL, OK, TXN, Op, Poll, Record, Send, TopicPartition, iter_reads

DUPLICATE = "duplicate"
INCONSISTENT_OFFSETS = "inconsistent-offsets"
G1A = "G1a"
PRECOMMITTED_READ = "precommitted-read"
PHANTOM_READ = "phantom-read"
LOST_WRITE = "lost-write"
UNSEEN = "unseen"
INCOMPLETE_DRAIN = "incomplete-drain"
TORN_TRANSACTION = "torn-transaction"
NONMONOTONIC_POLL = "nonmonotonic-poll"
POLL_SKIP = "poll-skip"
ZOMBIE_COMMIT = "zombie-commit"
G1C = "G1c"

KINDS = (
    DUPLICATE,
    INCONSISTENT_OFFSETS,
    G1A,
    PRECOMMITTED_READ,
    PHANTOM_READ,
    LOST_WRITE,
    UNSEEN,
    INCOMPLETE_DRAIN,
    TORN_TRANSACTION,
    NONMONOTONIC_POLL,
    POLL_SKIP,
    ZOMBIE_COMMIT,
    G1C,
)
EXAMPLES = 8  # examples kept per kind; every occurrence is counted


@dataclass
class Verdict:
    """Each anomaly kind found, with how often and a few examples; ``valid`` when there is none."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, example: dict[str, Any]) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        kept = self.examples.setdefault(kind, [])
        if len(kept) < EXAMPLES:
            kept.append(example)

    @property
    def valid(self) -> bool:
        return not self.counts

    @property
    def kinds(self) -> set[str]:
        return set(self.counts)

    def merge(self, other: Verdict) -> Verdict:
        for kind, examples in other.examples.items():
            self.examples.setdefault(kind, []).extend(examples[: EXAMPLES - len(self.examples[kind])])
        for kind, n in other.counts.items():
            self.counts[kind] = self.counts.get(kind, 0) + n
        self.stats.update(other.stats)
        return self

    def summary(self) -> str:
        head = "valid" if self.valid else "INVALID: " + ", ".join(f"{k} x{n}" for k, n in self.counts.items())
        lines = [head, "stats: " + ", ".join(f"{k}={v}" for k, v in self.stats.items())]
        for kind, examples in self.examples.items():
            lines.append(f"{kind}:")
            lines += [f"  {e}" for e in examples]
        return "\n".join(lines)


@dataclass
class Written:
    """The one write of a value: its operation and its send micro-op."""

    op: Op
    send: Send


@dataclass
class _Index:
    writes: dict[int, Written]
    drain: Op | None
    drained: dict[TopicPartition, dict[int, int]]  # offset -> value, from the drain only


def _index(ops: list[Op], verdict: Verdict) -> _Index:
    writes: dict[int, Written] = {}
    for op in ops:
        for send in op.sends():
            if send.value in writes:
                # The workload never writes a value twice: a second write is a harness bug, not an anomaly.
                raise ValueError(
                    f"value {send.value} written by ops {writes[send.value].op.index} and {op.index}"
                )
            writes[send.value] = Written(op, send)
    drains = [op for op in ops if op.f == DRAIN and op.type == OK]
    drain = drains[-1] if drains else None
    drained: dict[TopicPartition, dict[int, int]] = defaultdict(dict)
    if drain is not None:
        for poll in drain.polls():
            for r in poll.records:
                drained[r.tp][r.offset] = r.value
    if drain is None or not drain.complete:
        verdict.add(INCOMPLETE_DRAIN, {"drain": None if drain is None else drain.index})
    return _Index(writes, drain, drained)


def _offsets(ops: list[Op], index: _Index, verdict: Verdict) -> None:
    """duplicate and inconsistent-offsets, over acknowledged sends and every read."""
    positions: dict[int, set[tuple[str, int, int]]] = defaultdict(set)
    values_at: dict[tuple[str, int, int], set[int]] = defaultdict(set)
    for written in index.writes.values():
        s = written.send
        if s.offset is not None:
            positions[s.value].add((s.topic, s.partition, s.offset))
            values_at[(s.topic, s.partition, s.offset)].add(s.value)
    for _op, _poll, r in iter_reads(ops):
        positions[r.value].add((r.topic, r.partition, r.offset))
        values_at[(r.topic, r.partition, r.offset)].add(r.value)
    for value, where in sorted(positions.items()):
        if len(where) > 1:
            verdict.add(DUPLICATE, {"value": value, "at": sorted(where)})
    for at, values in sorted(values_at.items()):
        if len(values) > 1:
            verdict.add(INCONSISTENT_OFFSETS, {"at": at, "values": sorted(values)})


def _reads(ops: list[Op], index: _Index, verdict: Verdict) -> None:
    """G1a, precommitted-read and phantom-read: what each poll returned, against its write."""
    seen: set[tuple[str, int, int]] = set()  # (kind, reader op, value): one example per read
    for op, poll, r in iter_reads(ops):
        written = index.writes.get(r.value)
        if written is None:
            key = (PHANTOM_READ, op.index, r.value)
            if key not in seen:
                seen.add(key)
                verdict.add(PHANTOM_READ, {"value": r.value, "reader": op.index, "at": _at(r)})
            continue
        writer = written.op
        if writer.type == FAIL:
            kind = G1A
        elif writer.f == TXN and (writer.end_at is None or poll.at < writer.end_at or writer.end != "commit"):
            kind = PRECOMMITTED_READ
        else:
            continue
        key = (kind, op.index, r.value)
        if key not in seen:
            seen.add(key)
            verdict.add(
                kind,
                {"value": r.value, "writer": writer.index, "writer_process": writer.process,
                 "reader": op.index, "reader_process": op.process, "at": _at(r)},
            )  # fmt: skip


def _at(r: Record) -> list[Any]:
    return [r.topic, r.partition, r.offset]


def _drain_checks(ops: list[Op], index: _Index, verdict: Verdict) -> None:
    """lost-write, unseen and torn-transaction, against the final drain."""
    if index.drain is None:
        return
    drained_values = {v for offsets in index.drained.values() for v in offsets.values()}
    for value, written in sorted(index.writes.items()):
        if written.op.type != OK or value in drained_values:
            continue
        s = written.send
        end = index.drain.ends.get(s.tp)
        example = {"value": value, "writer": written.op.index, "at": [s.topic, s.partition, s.offset]}
        if s.offset is not None and end is not None and s.offset >= end:
            verdict.add(UNSEEN, {**example, "drain_end": end})
        else:
            verdict.add(LOST_WRITE, example)
    for op in ops:
        sent = [s.value for s in op.sends()]
        visible = [v for v in sent if v in drained_values]
        if visible and len(visible) < len(sent):
            verdict.add(
                TORN_TRANSACTION,
                {"op": op.index, "process": op.process, "type": op.type, "visible": visible,
                 "missing": [v for v in sent if v not in drained_values]},
            )  # fmt: skip


def _poll_order(ops: list[Op], index: _Index, verdict: Verdict) -> None:
    """nonmonotonic-poll and poll-skip, per consumer process and partition, in the order it polled."""
    polls: dict[str, list[tuple[int, Poll, Op]]] = defaultdict(list)
    for op in ops:
        for poll in op.polls():
            polls[op.process].append((poll.at, poll, op))
    for process, sequence in polls.items():
        last: dict[TopicPartition, int] = {}
        for _at_time, poll, op in sorted(sequence, key=lambda e: e[0]):
            for r in poll.records:
                previous = last.get(r.tp)
                last[r.tp] = r.offset
                if previous is None:
                    continue
                if r.offset <= previous:
                    verdict.add(
                        NONMONOTONIC_POLL,
                        {
                            "process": process,
                            "op": op.index,
                            "tp": list(r.tp),
                            "from": previous,
                            "to": r.offset,
                        },
                    )
                    continue
                committed = index.drained.get(r.tp, {})
                skipped = [o for o in range(previous + 1, r.offset) if o in committed]
                if skipped:
                    verdict.add(
                        POLL_SKIP,
                        {"process": process, "op": op.index, "tp": list(r.tp), "from": previous,
                         "to": r.offset, "skipped": skipped[:5]},
                    )  # fmt: skip


def _wr_cycles(ops: list[Op], index: _Index, verdict: Verdict) -> None:
    """G1c over write-read edges: writer -> reader for every value read, between different operations."""
    graph: dict[int, set[int]] = defaultdict(set)
    for op, _poll, r in iter_reads(ops):
        written = index.writes.get(r.value)
        if written is not None and written.op.index != op.index and op.f != DRAIN:
            graph[written.op.index].add(op.index)
    for component in strongly_connected(graph):
        component.sort()
        verdict.add(G1C, {"ops": component[:10], "cycle": find_cycle(graph, component)})


def check(ops: Iterable[Op]) -> Verdict:
    """Every check of this module over one history."""
    history = list(ops)
    verdict = Verdict()
    index = _index(history, verdict)
    _offsets(history, index, verdict)
    _reads(history, index, verdict)
    _drain_checks(history, index, verdict)
    _poll_order(history, index, verdict)
    _wr_cycles(history, index, verdict)
    for op in history:
        if op.zombie and op.type == OK:
            verdict.add(ZOMBIE_COMMIT, {"op": op.index, "process": op.process})
    verdict.stats = {
        "ops": len(history),
        "txns": sum(1 for op in history if op.f == TXN),
        "committed": sum(1 for op in history if op.f == TXN and op.type == OK),
        "aborted": sum(1 for op in history if op.f == TXN and op.type == FAIL),
        "unknown": sum(1 for op in history if op.f == TXN and op.type not in (OK, FAIL)),
        "values": len(index.writes),
        "drained": sum(len(o) for o in index.drained.values()),
    }
    return verdict
