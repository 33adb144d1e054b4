"""One consumer group of four different Kafka clients against a real agent, through joins, a clean leave,
a SIGKILL and restarts.

Every member is an OS process of its own, so that a kill is a real crash: tests/kafka/group_member.py runs
librdkafka (confluent-kafka), kafka-python or aiokafka, and tests/kafka/js/group_member.mjs runs kafkajs
under node. Each member commits every record it processes (offset + 1, synchronously, auto-commit off)
before it takes the next one, and reports on stdout, as JSON lines with timestamps, its assignments and
revocations (from the client's rebalance callbacks), each record it processed and each commit.

While a producer in this process writes to all partitions without pause, the group goes through:
librdkafka + kafka-python -> kafkajs joins -> aiokafka joins (all four clients, one group) -> kafkajs
leaves cleanly -> kafka-python is killed with SIGKILL (its session times out) -> kafka-python is started
again. Then the producer stops, the members drain the topic and leave, more records are written, and a
restarted kafkajs member, alone in the group, must start exactly at the group's committed offsets.

Checked after each step: the members' latest reported assignments cover every partition exactly once,
each member is consuming again, and the coordinator (DescribeGroups) shows the same members and
assignments. Checked over the whole run: no two members ever own a partition at the same time, and
every record is processed while its member owns the partition; per partition, the records processed follow
each other without a gap (none skipped) and without a repeat (no committed record is read twice), each new
owner starting at its predecessor's last commit; the only repeats allowed are records the killed member
processed but had not committed (at-least-once). A missing client library, node or kafkajs fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.fixtures.kafka import RunningBroker

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent
MEMBER_PY = HERE / "group_member.py"
JS_DIR = HERE / "js"
TOPIC, GROUP, PARTITIONS = "mixed", "mixed-group", 6
# Short group timings (tests/kafka/test_groups.py's FAST): rebalances take about a heartbeat, not seconds.
FAST = {"group_initial_rebalance_delay_ms": 100, "group_min_session_timeout_ms": 1000}
SESSION_MS, HEARTBEAT_MS = 6000, 300
KILLED_SESSION_MS = 3000  # the member that is killed: its partitions move after this long
SETTLED_FOR_S = 1.0  # a step is done when its assignment has held this long, the members consuming
STEP_TIMEOUT_S = 30.0
CLOCK_SLACK_S = 0.005  # kafkajs reports milliseconds (Date.now()), Python microseconds


@pytest.fixture
def gbroker(kafka_factory: Callable[..., Any]) -> Iterator[RunningBroker]:
    with kafka_factory(**FAST) as running:
        yield running


# --- members ------------------------------------------------------------------------------------------------
@dataclass
class Member:
    name: str
    client: str
    proc: subprocess.Popen[str]
    stderr_path: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    killed_at: float | None = None
    reader: threading.Thread = field(init=False)

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events)

    def read(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:
            for line in self.proc.stdout:
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    event = {"ev": "garbage", "t": time.time(), "line": line.rstrip()}
                with self.lock:
                    event["seq"] = len(self.events)
                    self.events.append(event)

    def stop(self) -> None:
        """Ask for a clean leave (close / disconnect: LeaveGroup)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("stop\n")
        self.close()

    def close(self) -> None:
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass

    def wait_closed(self, timeout: float = 20.0) -> None:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.name} did not leave within {timeout} s\n{self.describe()}")
        assert rc == 0, f"{self.name} exited with {rc}\n{self.describe()}"
        self.reader.join(5)
        assert any(e["ev"] == "closed" for e in self.snapshot()), (
            f"{self.name} did not close\n{self.describe()}"
        )

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, no last commit; the coordinator must time the session out."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.killed_at = time.time()  # after its death: the end of what it owned
        self.reader.join(5)

    def describe(self) -> str:
        events = self.snapshot()
        recs = sum(1 for e in events if e["ev"] == "rec")
        others = [e for e in events if e["ev"] not in ("rec", "commit")]
        stderr = self.stderr_path.read_text(errors="replace")[-3000:] if self.stderr_path.exists() else ""
        return (
            f"--- {self.name} ({self.client}), rc={self.proc.poll()}, {recs} records; events:\n"
            + "\n".join(json.dumps(e) for e in others[-15:])
            + f"\nstderr (tail):\n{stderr}"
        )


def start_member(broker: RunningBroker, tmp: Path, client: str, name: str, session_ms: int) -> Member:
    if client == "kafkajs":
        node = shutil.which("node")
        assert node is not None, "node is not installed (Node 20: see the Makefile's kafkajs step)"
        assert (JS_DIR / "node_modules" / "kafkajs" / "package.json").is_file(), (
            "kafkajs is not installed: run `make kafkajs` (npm ci in tests/kafka/js)"
        )
        cmd = [node, "group_member.mjs", broker.bootstrap, TOPIC, GROUP, name, str(session_ms)]
        cmd.append(str(HEARTBEAT_MS))
        cwd = JS_DIR
    else:
        cmd = [sys.executable, str(MEMBER_PY), client, broker.bootstrap, TOPIC, GROUP, name]
        cmd += ["--session-ms", str(session_ms), "--heartbeat-ms", str(HEARTBEAT_MS)]
        cwd = HERE.parents[1]
    stderr_path = tmp / f"{name}.stderr"
    with stderr_path.open("w") as stderr:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            bufsize=1,
            env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"},
        )
    member = Member(name, client, proc, stderr_path)
    member.reader = threading.Thread(target=member.read, name=f"read-{name}", daemon=True)
    member.reader.start()
    return member


# --- the producer -------------------------------------------------------------------------------------------
class Feed:
    """Writes records to every partition in turn, about 60 a second, until stopped; remembers the offset
    of each acknowledged one."""

    def __init__(self, broker: RunningBroker) -> None:
        self.producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all"})
        self.delivered: set[tuple[int, int]] = set()
        self.failed: list[str] = []
        self._sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="feed", daemon=True)

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.delivered.add((msg.partition(), msg.offset()))

    def send(self, n: int) -> None:
        for _ in range(n):
            i = self._sent
            self._sent += 1
            self.producer.produce(
                TOPIC, value=b"v%d" % i, partition=i % PARTITIONS, on_delivery=self._on_delivery
            )

    def _run(self) -> None:
        while not self._stop.is_set():
            self.send(3)
            self.producer.poll(0.05)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.flush()

    def flush(self) -> None:
        assert self.producer.flush(30) == 0, "records left unacknowledged"
        assert not self.failed, f"deliveries failed: {self.failed[:5]}"

    def end_offsets(self) -> dict[int, int]:
        ends = dict.fromkeys(range(PARTITIONS), 0)
        for p, o in self.delivered:
            ends[p] = max(ends[p], o + 1)
        assert sum(ends.values()) == len(self.delivered), "offsets are not dense"
        return ends


# --- one step of the scenario: wait until the group has settled -------------------------------------------
def current_parts(events: list[dict[str, Any]], since: float) -> tuple[list[int], float] | None:
    """The member's latest assignment, if it came after ``since`` and was not revoked since."""
    for e in reversed(events):
        if e["ev"] == "assigned":
            return (e["parts"], e["t"]) if e["t"] >= since else None
        if e["ev"] in ("revoked", "lost", "closed"):
            return None
    return None


def settled(admin: AdminClient, live: list[Member], since: float) -> str | None:
    """None once the live members' assignments partition the topic and each consumes; else what is not so."""
    owner: dict[int, str] = {}
    for m in live:
        if m.proc.poll() is not None:
            pytest.fail(f"{m.name} exited with {m.proc.returncode}\n{m.describe()}")
        events = m.snapshot()
        current = current_parts(events, since)
        if current is None:
            return f"{m.name} has no assignment since the change"
        parts, assigned_at = current
        for p in parts:
            if p in owner:
                return f"partition {p} is assigned to {owner[p]} and {m.name}"
            owner[p] = m.name
        if not any(e["ev"] == "rec" and e["t"] >= assigned_at for e in events):
            return f"{m.name} has not consumed since its assignment {parts}"
    if set(owner) != set(range(PARTITIONS)):
        return f"partitions {sorted(set(range(PARTITIONS)) - set(owner))} have no owner: {owner}"
    # The coordinator's view: the same members, Stable, each with the partitions it reported.
    described = admin.describe_consumer_groups([GROUP])[GROUP].result(10)
    if not str(described.state).endswith("STABLE"):
        return f"the group is {described.state}"
    by_client = {
        m.client_id: sorted(tp.partition for tp in m.assignment.topic_partitions) for m in described.members
    }
    reported = {m.name: sorted(p for p, name in owner.items() if name == m.name) for m in live}
    if by_client != reported or len(described.members) != len(live):
        return f"DescribeGroups shows {by_client}, the members report {reported}"
    return None


def wait_settled(
    broker: RunningBroker, admin: AdminClient, live: list[Member], since: float, step: str
) -> float:
    """Poll until ``settled`` holds for SETTLED_FOR_S; returns how long the step took from ``since``."""
    deadline = time.monotonic() + STEP_TIMEOUT_S
    held_since: float | None = None
    why: str | None = "not checked"
    while time.monotonic() < deadline:
        why = settled(admin, live, since)
        if why is None:
            held_since = held_since or time.monotonic()
            if time.monotonic() - held_since >= SETTLED_FOR_S:
                return time.time() - since - SETTLED_FOR_S
        else:
            held_since = None
        time.sleep(0.05)
    pytest.fail(
        f"{step}: the group did not settle in {STEP_TIMEOUT_S} s: {why}\n{agent(broker)}\n" + everyone(live)
    )


def agent(broker: RunningBroker) -> str:
    """What the agent's Kafka listener holds: a consumer that stops fetching may wait for the budget."""
    server = broker.runtime.kafka
    if server is None:
        return "the agent has no Kafka listener"
    budget = server.ctx.fetch_budget
    return f"agent fetch budget: {budget.held} of {budget.total} bytes held"


def everyone(members: list[Member]) -> str:
    return "\n".join(m.describe() for m in members)


def wait_for(
    broker: RunningBroker,
    condition: Callable[[], bool],
    what: str,
    members: list[Member],
    timeout: float = 30,
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout} s\n{agent(broker)}\n" + everyone(members))
        time.sleep(0.05)


# --- the checks over the whole run --------------------------------------------------------------------------
@dataclass
class Ownership:
    member: str
    partition: int
    start: float
    end: float


def ownerships(m: Member) -> list[Ownership]:
    """Each partition the member held, from its assignment to the next revocation, assignment, leave, or
    its kill."""
    out: list[Ownership] = []
    held: list[int] = []
    since = 0.0
    end_of_life = m.killed_at if m.killed_at is not None else float("inf")
    for e in m.snapshot():
        if e["ev"] in ("assigned", "revoked", "lost", "closed"):
            out += [Ownership(m.name, p, since, e["t"]) for p in held]
            held = e["parts"] if e["ev"] == "assigned" else []
            since = e["t"]
    out += [Ownership(m.name, p, since, end_of_life) for p in held]
    return out


def check_ownership(members: list[Member]) -> None:
    spans = [o for m in members for o in ownerships(m)]
    for a in spans:
        for b in spans:
            if a.member < b.member and a.partition == b.partition:
                overlap = min(a.end, b.end) - max(a.start, b.start)
                assert overlap <= CLOCK_SLACK_S, f"{a} and {b} overlap by {overlap:.3f} s"
    for m in members:
        mine = [o for o in spans if o.member == m.name]
        for e in m.snapshot():
            if e["ev"] == "rec":
                assert any(
                    o.partition == e["p"] and o.start <= e["t"] <= o.end + CLOCK_SLACK_S for o in mine
                ), f"{m.name} processed {e} while not owning partition {e['p']}"


def check_records(members: list[Member], killed: Member, produced: set[tuple[int, int]]) -> None:
    """Per partition, in time order: each record follows the previous one, a new owner starts at its
    predecessor's last commit; a repeat only of what the killed member had not committed."""
    for m in members:
        events = m.snapshot()
        bad = [e for e in events if e["ev"] in ("commit_failed", "lost", "error", "garbage")]
        assert not bad, f"{m.name} reported {bad[:5]}"
        if m is not killed:  # every record processed was committed
            recs = sum(1 for e in events if e["ev"] == "rec")
            assert recs == sum(1 for e in events if e["ev"] == "commit"), f"{m.name}: a record not committed"
    killed_events = killed.snapshot()
    killed_committed: dict[int, int] = {}
    for e in killed_events:
        if e["ev"] == "commit":
            killed_committed[e["p"]] = max(killed_committed.get(e["p"], 0), e["o"])

    consumed: set[tuple[int, int]] = set()
    repeats: list[tuple[int, int]] = []
    by_partition: dict[int, list[tuple[float, str, int, int]]] = defaultdict(list)
    for m in members:
        for e in m.snapshot():
            if e["ev"] == "rec":
                by_partition[e["p"]].append((e["t"], m.name, e["seq"], e["o"]))
    for p, in_time in sorted(by_partition.items()):
        expected, previous = 0, None
        for _, name, _, o in sorted(in_time):
            if o < expected:
                # Only a record the killed member processed and did not commit may come again, once, from
                # the member that took the partition over.
                again = (
                    f"partition {p}: {name} read offset {o} again after {previous} read up to {expected - 1}"
                )
                assert previous == killed.name, again
                assert name != killed.name, again
                assert o >= killed_committed.get(p, 0), (
                    f"partition {p}: offset {o} was committed by {killed.name} (up to "
                    f"{killed_committed.get(p)}) and still read again by {name}"
                )
                repeats.append((p, o))
            else:
                assert o == expected, (
                    f"partition {p}: {name} read offset {o} after offset {expected - 1} ({previous}): "
                    f"{o - expected} skipped"
                )
            expected, previous = o + 1, name
            consumed.add((p, o))
    assert consumed <= produced, f"records read that were never written: {sorted(consumed - produced)[:5]}"
    missing = produced - consumed
    assert not missing, f"{len(missing)} records never read: {sorted(missing)[:10]}"
    # At most the record in hand per partition: the killed member committed each one before the next.
    assert len(repeats) <= PARTITIONS, repeats


# --- the test -----------------------------------------------------------------------------------------------
def test_mixed_clients_group_join_leave_kill_restart(gbroker: RunningBroker, tmp_path: Path) -> None:
    started = time.monotonic()
    admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS)]).values():
        future.result(10)
    feed = Feed(gbroker)
    feed.start()
    members: list[Member] = []
    timings: dict[str, float] = {}

    def start(client: str, name: str, session_ms: int = SESSION_MS) -> Member:
        member = start_member(gbroker, tmp_path, client, name, session_ms)
        members.append(member)
        return member

    try:
        t = time.time()
        lib = start("confluent", "librdkafka")
        kpy = start("kafka-python", "kafka-python", KILLED_SESSION_MS)
        timings["two members"] = wait_settled(gbroker, admin, [lib, kpy], t, "librdkafka + kafka-python")

        t = time.time()
        kjs = start("kafkajs", "kafkajs")
        timings["kafkajs joins"] = wait_settled(gbroker, admin, [lib, kpy, kjs], t, "kafkajs joins")

        t = time.time()
        aio = start("aiokafka", "aiokafka")
        timings["aiokafka joins"] = wait_settled(gbroker, admin, [lib, kpy, kjs, aio], t, "aiokafka joins")

        t = time.time()
        kjs.stop()
        kjs.wait_closed()
        timings["kafkajs leaves"] = wait_settled(gbroker, admin, [lib, kpy, aio], t, "kafkajs leaves")

        kpy.kill()
        assert kpy.killed_at is not None
        timings["kafka-python killed"] = wait_settled(
            gbroker, admin, [lib, aio], kpy.killed_at, "kafka-python killed"
        )

        t = time.time()
        kpy2 = start("kafka-python", "kafka-python-again")
        timings["kafka-python restarts"] = wait_settled(
            gbroker, admin, [lib, aio, kpy2], t, "kafka-python restarts"
        )

        # Drain: the producer stops, the members read everything, then leave.
        feed.stop()
        produced = set(feed.delivered)
        live = [lib, aio, kpy2]

        def drained() -> bool:
            seen = {(e["p"], e["o"]) for m in members for e in m.snapshot() if e["ev"] == "rec"}
            return produced <= seen

        wait_for(gbroker, drained, "the members read every record written", members)
        for m in live:
            m.stop()
        for m in live:
            m.wait_closed()
        ends = feed.end_offsets()
        committed = {o.partition: o.offset for o in gbroker.runtime.metadata.group_offsets(GROUP)}
        assert committed == ends, f"committed {committed}, written up to {ends}"

        check_ownership(members)
        check_records(members, kpy, produced)

        # A restarted member, alone in the group, resumes exactly after the group's last commits.
        feed.send(2 * PARTITIONS)
        feed.flush()
        fresh = set(feed.delivered) - produced
        t = time.time()
        again = start("kafkajs", "kafkajs-again")
        timings["kafkajs restarts alone"] = wait_settled(gbroker, admin, [again], t, "kafkajs restarts alone")

        def read_fresh() -> bool:
            return fresh <= {(e["p"], e["o"]) for e in again.snapshot() if e["ev"] == "rec"}

        wait_for(gbroker, read_fresh, "the restarted member read the new records", members)
        again.stop()
        again.wait_closed()
        got = [(e["p"], e["o"]) for e in again.snapshot() if e["ev"] == "rec"]
        assert sorted(got) == sorted(fresh), f"the restarted member read {sorted(got)}, not {sorted(fresh)}"
        assert {p: min(o for q, o in got if q == p) for p, _ in got} == ends
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.proc.kill()
                m.proc.wait(10)
            m.close()
            m.reader.join(5)
    took = time.monotonic() - started
    print(f"steps (s): { {k: round(v, 2) for k, v in timings.items()} }; whole test {took:.1f} s")
