"""Transactions, as the protocol pins them down: the coordinator's answers and error codes, transactional
produce, the markers' offsets, read_committed fetches with the last stable offset and the aborted list,
ListOffsets by isolation level, and OffsetFetch's require_stable.

Kafka's coordinator writes its markers after it answers EndTxn, so a step that depends on them waits
until the partition's last stable offset has reached its high watermark (``settled``); a request Kafka
answers CONCURRENT_TRANSACTIONS meanwhile is repeated (``until_final``), and so are the codes a new Kafka
cluster answers while its transaction log is being created. Strata ends a transaction in one metadata
transaction, so both loops end at once there.
"""

from __future__ import annotations

import struct
import time
from typing import Any

from kafka.protocol.consumer.group import OffsetFetchRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.producer.produce import ProduceRequest
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

from tests.differential.base import Answers, batch, create_topic, patched, scenario
from tests.differential.scenarios_log import fetch, list_offsets
from tests.differential.wire import Side

# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS
NOT_YET = frozenset({14, 15, 16, 51})
TRANSACTIONAL = 0x10


def until_final(call: Any) -> Any:
    """``call()`` again while it answers a code that means "not yet" (at most 60 s: a Kafka broker that is
    busy loads its 50 transaction-log partitions for a while after its first FindCoordinator)."""
    deadline = time.monotonic() + 60
    while True:
        got = call()
        if _code(got) not in NOT_YET or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def _code(got: Any) -> int:
    if "error_code" in got:
        return int(got["error_code"])
    codes = [
        p.get("partition_error_code", 0)
        for t in got.get("results_by_topic_v3_and_below", [])
        for p in t["results_by_partition"]
    ]
    return max(codes, default=0)


def transactional(values: list[bytes | None], producer_id: int, epoch: int, sequence: int) -> bytes:
    """A transactional producer's batch: attributes bit 4, its producer id, epoch and base sequence."""
    data = patched(batch(values), 21, "h", TRANSACTIONAL)
    return patched(data, 43, "qhi", producer_id, epoch, sequence)


def txn_produce(side: Side, txn_id: str, topic: str, partition: int, data: bytes) -> Any:
    return side.call(
        ProduceRequest,
        {
            "transactional_id": txn_id,
            "acks": -1,
            "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": data}]}],
        },
    )


@scenario(quick=True)
def transactions(side: Side, prefix: str) -> Answers:
    """A transaction committed and one aborted, with their errors, markers and read_committed reads."""
    t = f"{prefix}-txn"
    txn_id = f"{prefix}-producer"
    out: Answers = {"create": create_topic(side, t, 2)}

    def init(timeout_ms: int = 60000, tid: str = txn_id) -> Any:
        return until_final(
            lambda: side.call(
                InitProducerIdRequest, {"transactional_id": tid, "transaction_timeout_ms": timeout_ms}
            )
        )

    def add(pid: int, epoch: int, *partitions: int) -> Any:
        return until_final(
            lambda: side.call(
                AddPartitionsToTxnRequest,
                {
                    "v3_and_below_transactional_id": txn_id,
                    "v3_and_below_producer_id": pid,
                    "v3_and_below_producer_epoch": epoch,
                    "v3_and_below_topics": [{"name": t, "partitions": list(partitions)}],
                },
            )
        )

    def end(pid: int, epoch: int, commit: bool) -> Any:
        return until_final(
            lambda: side.call(
                EndTxnRequest,
                {
                    "transactional_id": txn_id,
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "committed": commit,
                },
            )
        )

    def settled(partition: int) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            fetch(side, t, partition, 0)
            raw = side.last_raw["responses"][0]["partitions"][0]
            if raw["last_stable_offset"] == raw["high_watermark"]:
                return
            time.sleep(0.1)

    # Kafka creates its transaction log (and the offsets topic) when a coordinator is first looked up, and
    # refuses transaction requests until then, as clients look one up first.
    for key, key_type in ((txn_id, 1), (f"{txn_id}-long", 1), (f"{prefix}-g", 0)):
        out[f"find coordinator {key_type}"] = until_final(
            # v3 names one key (v4 batches them, KIP-699): the version every client here sends.
            lambda key=key, key_type=key_type: side.call(
                FindCoordinatorRequest, {"key": key, "key_type": key_type}, version=3
            )
        )
    got = init()
    pid, epoch = got["producer_id"], got["producer_epoch"]
    out["init"] = {"error_code": got["error_code"], "epoch": epoch}
    too_long = init(2147483647, f"{txn_id}-long")
    out["init with too long a timeout"] = {"error_code": too_long["error_code"]}
    out["end before anything"] = end(pid, epoch, True)
    out["add with another producer id"] = add(pid + 1000, epoch, 0)
    out["produce outside the transaction"] = txn_produce(
        side, txn_id, t, 0, transactional([b"x"], pid, epoch, 0)
    )
    out["add"] = add(pid, epoch, 0, 1)
    out["produce p0"] = txn_produce(side, txn_id, t, 0, transactional([b"a", b"b", b"c"], pid, epoch, 0))
    out["produce p1"] = txn_produce(side, txn_id, t, 1, transactional([b"d"], pid, epoch, 0))
    out["read_uncommitted while open"] = fetch(side, t, 0, 0)
    out["latest while open"] = list_offsets(side, t, (0, -1))
    out["commit"] = end(pid, epoch, True)
    settled(0)
    out["commit again"] = end(pid, epoch, True)
    out["abort after commit"] = end(pid, epoch, False)
    out["read committed"] = _read_all(side, t, 0, committed=True)
    out["read p1 committed"] = _read_all(side, t, 1, committed=True)
    out["add again"] = add(pid, epoch, 0)
    out["produce to abort"] = txn_produce(side, txn_id, t, 0, transactional([b"e", b"f"], pid, epoch, 3))
    out["abort"] = end(pid, epoch, False)
    settled(0)
    out["read committed after abort"] = _read_all(side, t, 0, committed=True)
    out["read uncommitted after abort"] = _read_all(side, t, 0, committed=False)
    out["one read committed from the aborted batch"] = _fetch(side, t, 0, 4, committed=True)
    out["latest committed"] = _list_offsets(side, t, committed=True)
    out["latest uncommitted"] = _list_offsets(side, t, committed=False)
    again = init()
    out["init again"] = {"error_code": again["error_code"], "epoch": again["producer_epoch"]}
    out["end with the fenced epoch"] = end(pid, epoch, True)
    out.update(_offsets(side, f"{prefix}-g", txn_id, t, again["producer_id"], again["producer_epoch"]))
    return out


def _fetch(side: Side, topic: str, partition: int, offset: int, committed: bool) -> Any:
    return fetch(side, topic, partition, offset, isolation_level=1 if committed else 0)


def _read_all(side: Side, topic: str, partition: int, committed: bool) -> Answers:
    """What a consumer reads from offset 0 to the end, fetch after fetch: every batch (markers included)
    and every aborted transaction listed. Where one answer stops is each broker's choice (Kafka's may end
    after one batch, Strata's after a whole flush's chunk), so the fetches are not compared one by one."""
    batches: list[Any] = []
    aborted: list[Any] = []
    offset = 0
    for _ in range(20):
        got = _fetch(side, topic, partition, offset, committed)["responses"][0]["partitions"][0]
        raw = side.last_raw["responses"][0]["partitions"][0]
        for entry in got.get("aborted_transactions") or []:
            if entry not in aborted:
                aborted.append(entry)
        end = raw["last_stable_offset"] if committed else raw["high_watermark"]
        batches.extend(got["records"])
        data = raw["records"] or b""
        if not data:
            break
        offset = _after_last_batch(data)
        if offset >= end:
            break
    return {"batches": batches, "aborted": aborted, "error_code": got["error_code"]}


def _after_last_batch(data: bytes) -> int:
    """The offset after the last whole batch of a fetch answer's records."""
    pos, after = 0, 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data):
            break
        after = base + struct.unpack_from(">i", data, pos + 23)[0] + 1
        pos += 12 + length
    return after


def _list_offsets(side: Side, topic: str, committed: bool) -> Any:
    return list_offsets(side, topic, (0, -1), isolation_level=1 if committed else 0)


def _offsets(side: Side, group: str, txn_id: str, topic: str, pid: int, epoch: int) -> Answers:
    """Offsets sent to a transaction: pending (UNSTABLE_OFFSET_COMMIT to require_stable) until it commits."""
    out: Answers = {}
    out["add offsets"] = until_final(
        lambda: side.call(
            AddOffsetsToTxnRequest,
            {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "group_id": group},
        )
    )
    out["txn offset commit"] = until_final(
        lambda: side.call(
            TxnOffsetCommitRequest,
            {
                "transactional_id": txn_id,
                "group_id": group,
                "producer_id": pid,
                "producer_epoch": epoch,
                "generation_id": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 3,
                                "committed_leader_epoch": -1,
                                "committed_metadata": "",
                            }
                        ],
                    }
                ],
            },
        )
    )

    def offset_fetch() -> Any:
        return until_final(
            lambda: side.call(
                OffsetFetchRequest,
                {
                    "group_id": group,
                    "topics": [{"name": topic, "partition_indexes": [0]}],
                    "require_stable": True,
                },
            )
        )

    out["offset fetch while open"] = offset_fetch()
    out["commit offsets"] = until_final(
        lambda: side.call(
            EndTxnRequest,
            {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": True},
        )
    )
    deadline = time.monotonic() + 10
    got = offset_fetch()
    while _unstable(got) and time.monotonic() < deadline:
        time.sleep(0.1)
        got = offset_fetch()
    out["offset fetch after commit"] = got
    return out


def _unstable(got: Any) -> bool:
    """Whether an OffsetFetch answer still says not yet: the group's or a partition's code."""
    if got.get("error_code") in NOT_YET:
        return True
    return any(p["error_code"] == 88 for t in got.get("topics", []) for p in t["partitions"])  # UNSTABLE
