"""The exactly-once checker (tests/eos) on hand-made histories: each anomaly kind is found in a history built
to have it, and a clean history has none. Histories go through the JSON-lines loader, so the loader's
pairing of invokes and completions is exercised on the way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.eos import checker, copycheck
from tests.eos.checker import check
from tests.eos.cycles import find_cycle, strongly_connected
from tests.eos.history import HistoryWriter, Op, Record, Send, load_history, ops_from_events, read_events

T = "t"


def send(partition: int, value: int, offset: int | None) -> dict[str, Any]:
    return {"f": "send", "topic": T, "partition": partition, "key": None, "value": value, "offset": offset}


class History:
    """Events on a fake clock, 10 ns per event; a ``poll`` micro-op takes the time it is built at."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.time = 0

    def tick(self) -> int:
        self.time += 10
        return self.time

    def event(self, process: str, type_: str, f: str, value: Any) -> None:
        self.events.append({"process": process, "type": type_, "f": f, "time": self.tick(), "value": value})

    def poll(self, *records: tuple[int, int, int]) -> dict[str, Any]:
        return {"f": "poll", "at": self.tick(), "records": [[T, p, o, None, v] for p, o, v in records]}

    def txn(
        self, process: str, *mops: dict[str, Any], outcome: str = "ok", end: str | None = "commit"
    ) -> None:
        invoke = [{**m, "offset": None} if m["f"] == "send" else {**m, "records": []} for m in mops]
        self.event(process, "invoke", "txn", {"mops": invoke, "end": None, "end_at": None})
        end_at = self.tick() if end is not None else None
        self.event(process, outcome, "txn", {"mops": list(mops), "end": end, "end_at": end_at})

    def drain(self, ends: dict[int, int], *records: tuple[int, int, int], complete: bool = True) -> None:
        value = {
            "mops": [self.poll(*records)],
            "ends": [[T, p, e] for p, e in ends.items()],
            "complete": complete,
        }
        self.event("drain", "invoke", "drain", None)
        self.event("drain", "ok", "drain", value)

    def ops(self) -> list[Op]:
        return ops_from_events(self.events)


def clean() -> History:
    """Offsets: a commit marker after each committed transaction's records, an abort marker after aborted.

    p0: 0 v1 (w1), 1 marker, 2 v3 (w3, aborted), 3 marker, 4 v4 (w1), 5 marker; p1: 0 v2 (w1), 1 marker.
    w2 reads p0 at 0 then 4: the gap holds no committed record, so it is no skip.
    """
    h = History()
    h.txn("w1", send(0, 1, 0), send(1, 2, 0))
    h.txn("w2", h.poll((0, 0, 1), (1, 0, 2)))
    h.txn("w3", send(0, 3, 2), outcome="fail", end="abort")
    h.txn("w1", send(0, 4, 4))
    h.txn("w2", h.poll((0, 4, 4)))
    h.drain({0: 6, 1: 2}, (0, 0, 1), (0, 4, 4), (1, 0, 2))
    return h


def kinds(h: History) -> set[str]:
    return check(h.ops()).kinds


def test_a_clean_history_is_valid() -> None:
    verdict = check(clean().ops())
    assert verdict.valid, verdict.summary()
    assert verdict.stats["committed"] == 4
    assert verdict.stats["aborted"] == 1


def test_duplicate_one_value_at_two_offsets() -> None:
    h = clean()
    h.events.pop()  # the drain, replaced by one that reads v4 twice
    h.events.pop()
    h.drain({0: 7, 1: 2}, (0, 0, 1), (0, 4, 4), (0, 6, 4), (1, 0, 2))
    assert checker.DUPLICATE in kinds(h)


def test_inconsistent_offsets_two_values_at_one_offset() -> None:
    h = clean()
    h.txn("w2", h.poll((1, 0, 1)))  # v1 was acknowledged at p0/0; here it is read at p1/0, where v2 is
    assert {checker.INCONSISTENT_OFFSETS, checker.DUPLICATE} <= kinds(h)


def test_g1a_an_aborted_value_is_read() -> None:
    h = clean()
    h.txn("w4", h.poll((0, 2, 3)))
    assert checker.G1A in kinds(h)
    # ... and seen in the drain, too.
    h2 = clean()
    h2.events[-1]["value"]["mops"][0]["records"].append([T, 0, 2, None, 3])
    assert checker.G1A in kinds(h2)


def test_precommitted_read_before_the_commit_was_invoked() -> None:
    h = History()
    # w2's poll returns v1 at time 30, but w1 invokes its commit only at time 40.
    h.event("w1", "invoke", "txn", {"mops": [send(0, 1, None)], "end": None, "end_at": None})
    h.txn("w2", h.poll((0, 0, 1)))
    end_at = h.tick()
    h.event("w1", "ok", "txn", {"mops": [send(0, 1, 0)], "end": "commit", "end_at": end_at})
    h.drain({0: 2}, (0, 0, 1))
    assert kinds(h) >= {checker.PRECOMMITTED_READ}
    assert checker.G1A not in kinds(h)


def test_precommitted_read_of_a_transaction_that_never_asked_to_commit() -> None:
    h = clean()
    h.txn("w5", send(1, 9, 2), outcome="info", end=None)  # abandoned: commit never invoked
    h.txn("w2", h.poll((1, 2, 9)))
    assert checker.PRECOMMITTED_READ in kinds(h)


def test_phantom_read_of_a_value_nobody_wrote() -> None:
    h = clean()
    h.txn("w2", h.poll((1, 5, 77)))
    assert checker.PHANTOM_READ in kinds(h)


def test_lost_write_a_committed_value_missing_from_the_drain() -> None:
    h = clean()
    h.events[-1]["value"]["mops"][0]["records"] = [[T, 0, 0, None, 1], [T, 1, 0, None, 2]]  # no v4
    assert checker.LOST_WRITE in kinds(h)


def test_unseen_a_committed_value_past_the_drains_end() -> None:
    h = clean()
    # The drain stopped at p0/3, before v4's offset, so it cannot say v4 was lost.
    h.events[-1]["value"]["ends"] = [[T, 0, 3], [T, 1, 2]]
    h.events[-1]["value"]["mops"][0]["records"] = [[T, 0, 0, None, 1], [T, 1, 0, None, 2]]
    found = check(h.ops())
    assert checker.UNSEEN in found.kinds
    assert checker.LOST_WRITE not in found.kinds


def test_incomplete_or_missing_drain() -> None:
    h = clean()
    h.events[-1]["value"]["complete"] = False
    assert checker.INCOMPLETE_DRAIN in kinds(h)
    h.events = h.events[:-2]
    assert checker.INCOMPLETE_DRAIN in kinds(h)


def test_torn_transaction_partly_visible() -> None:
    h = clean()
    h.events[-1]["value"]["mops"][0]["records"] = [[T, 0, 0, None, 1], [T, 0, 4, None, 4]]  # v2 missing
    found = check(h.ops())
    assert checker.TORN_TRANSACTION in found.kinds
    # A transaction of unknown outcome (its commit timed out) must not be torn either.
    h2 = History()
    h2.txn("w6", send(0, 10, 0), send(1, 11, 0), outcome="info")
    h2.drain({0: 2, 1: 2}, (0, 0, 10))
    assert kinds(h2) == {checker.TORN_TRANSACTION}


def test_nonmonotonic_poll() -> None:
    h = clean()
    h.txn("w2", h.poll((0, 0, 1)))  # w2 read p0/4 already
    assert checker.NONMONOTONIC_POLL in kinds(h)


def test_poll_skip_only_over_a_committed_value() -> None:
    h = History()
    h.txn("w1", send(0, 1, 0))  # 0, marker 1
    h.txn("w1", send(0, 2, 2))  # 2, marker 3
    h.txn("w1", send(0, 3, 4))  # 4, marker 5
    h.txn("w2", h.poll((0, 0, 1)))
    h.txn("w2", h.poll((0, 4, 3)))  # skips v2 at 2: committed
    h.drain({0: 6}, (0, 0, 1), (0, 2, 2), (0, 4, 3))
    assert kinds(h) == {checker.POLL_SKIP}


def test_zombie_commit() -> None:
    h = clean()
    h.txn("w1", outcome="ok")
    h.events[-1]["value"]["zombie"] = True
    assert kinds(h) == {checker.ZOMBIE_COMMIT}
    h.events[-1]["type"] = "fail"
    assert kinds(h) == set()


def test_g1c_a_write_read_cycle() -> None:
    h = History()
    # w1 and w2 each read the other's value inside their own transaction: only uncommitted reads allow it.
    h.event("w1", "invoke", "txn", {"mops": [], "end": None, "end_at": None})
    h.event("w2", "invoke", "txn", {"mops": [], "end": None, "end_at": None})
    p1, p2 = h.poll((1, 0, 2)), h.poll((0, 0, 1))
    e1, e2 = h.tick(), h.tick()
    h.event("w1", "ok", "txn", {"mops": [send(0, 1, 0), p1], "end": "commit", "end_at": e1})
    h.event("w2", "ok", "txn", {"mops": [send(1, 2, 0), p2], "end": "commit", "end_at": e2})
    h.drain({0: 2, 1: 2}, (0, 0, 1), (1, 0, 2))
    verdict = check(h.ops())
    assert checker.G1C in verdict.kinds
    assert verdict.examples[checker.G1C][0]["cycle"] in ([0, 1, 0], [1, 0, 1])


def test_cycle_search() -> None:
    graph = {1: {2}, 2: {3}, 3: {1, 4}, 4: {5}, 5: set(), 6: {6}}
    components = strongly_connected(graph)
    assert [sorted(c) for c in components] == [[1, 2, 3]]
    cycle = find_cycle(graph, sorted(components[0]))
    assert cycle == [1, 2, 3, 1]
    chain = {i: {i + 1} for i in range(5000)}  # deeper than the recursion limit
    chain[5000] = {0}
    assert len(strongly_connected(chain)[0]) == 5001


def test_loader_merges_files_and_completes_a_dead_invoke(tmp_path: Path) -> None:
    a, b = HistoryWriter(tmp_path / "a.jsonl", "a"), HistoryWriter(tmp_path / "b.jsonl", "b")
    a.event("invoke", "txn", a.txn_value([Send(T, 0, None, 1)], None, None))
    b.event("invoke", "txn", b.txn_value([], None, None))
    b.event("ok", "txn", b.txn_value([], "commit", 5))
    a.close()
    b.close()
    with (tmp_path / "a.jsonl").open("a") as f:
        f.write('{"process": "a", "type": "ok", "f": "tx')  # a SIGKILL mid-line
    ops = load_history(tmp_path)
    assert [(op.process, op.type) for op in ops] == [("b", "ok"), ("a", "info")]
    assert ops[1].sends()[0].value == 1
    assert len(read_events([tmp_path / "b.jsonl"])) == 2
    with pytest.raises(ValueError, match="open"):
        ops_from_events(
            [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()[:1]] * 2
        )


def test_a_crash_inside_a_transaction_is_an_op_of_its_own() -> None:
    h = History()
    h.event("w1", "invoke", "txn", {"mops": [], "end": None, "end_at": None})
    h.event("w1", "info", "crash", {"incarnation": 1})
    h.event("w1", "fail", "txn", {"mops": [send(0, 1, 0)], "end": None, "end_at": None})
    h.drain({0: 2})
    ops = h.ops()
    assert [(op.f, op.type) for op in ops] == [("crash", "info"), ("txn", "fail"), ("drain", "ok")]
    assert check(ops).valid
    h.events[-1]["value"]["mops"][0]["records"] = [[T, 0, 0, None, 1]]  # the abandoned write shows
    assert kinds(h) == {checker.G1A}


def _records(*triples: tuple[int, int, int]) -> list[Record]:
    return [Record("out", p, o, None, v) for p, o, v in triples]


def test_copy_clean_and_each_copy_anomaly() -> None:
    inputs = {0: [10, 12, 14], 1: [11, 13]}
    good = _records((0, 0, 10), (0, 1, 11), (0, 2, 12), (0, 3, 13), (0, 5, 14))
    assert copycheck.check_copy(inputs, good, ordered=True, committed={0: 3, 1: 2}).valid
    dup = [*good, *_records((0, 6, 12))]
    assert copycheck.check_copy(inputs, dup).kinds == {copycheck.COPY_DUPLICATE}
    assert copycheck.check_copy(inputs, good[:-1]).kinds == {copycheck.COPY_LOST}
    assert copycheck.check_copy(inputs, [*good, *_records((0, 7, 99))]).kinds == {copycheck.COPY_PHANTOM}
    swapped = _records((0, 0, 12), (0, 1, 11), (0, 2, 10), (0, 3, 13), (0, 5, 14))
    assert copycheck.check_copy(inputs, swapped).valid  # order is checked only when asked
    assert copycheck.check_copy(inputs, swapped, ordered=True).kinds == {copycheck.COPY_ORDER}
    offsets = copycheck.check_copy(inputs, good, committed={0: 2, 1: 2})
    assert offsets.kinds == {copycheck.GROUP_OFFSETS}
