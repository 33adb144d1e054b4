"""kafkajs 2.2.4 transactions against Strata and the reference Kafka broker: tests/kafka/js/transactions.mjs.

kafkajs knows versions 0 and 1 of InitProducerId (it retries CONCURRENT_TRANSACTIONS), AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit and EndTxn, and sends v1 to a broker that has it; FindCoordinator v2,
Fetch up to v11, ListOffsets up to v3, Produce up to v7. Its consumer is read_committed by default.

The script commits, aborts, and commits with sendOffsets; this test checks what kafkajs reports (offsets of
its sends, what its consumer read, the group's offsets its admin fetched) and what librdkafka reads back at
both isolation levels.
`make test` installs tests/kafka/js/node_modules (npm ci); without node or kafkajs this test fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.targets import Target, unique
from tests.kafka.transactions import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    committed,
    create_topics,
    produce_plain,
    read_all,
)

pytestmark = pytest.mark.integration
JS_DIR = Path(__file__).parent / "js"


def test_kafkajs_commits_aborts_and_sends_offsets(target: Target) -> None:
    node = shutil.which("node")
    assert node is not None, "node is not installed (Node 20: see the Makefile's kafkajs step)"
    assert (JS_DIR / "node_modules" / "kafkajs" / "package.json").is_file(), (
        "kafkajs is not installed: run `make kafkajs` (npm ci in tests/kafka/js)"
    )
    output, source, group = unique("kjs-out"), unique("kjs-in"), unique("kjs-group")
    create_topics(target.bootstrap, {output: 2, source: 2})
    produce_plain(target.bootstrap, source, [(p, b"in-%d" % i) for p in (0, 1) for i in range(10)])
    # Nothing committed yet. The question also makes a fresh Kafka create its offsets topic, which kafkajs's
    # sendOffsets does not wait for: its TxnOffsetCommit fails on NOT_COORDINATOR instead of retrying.
    assert committed(target.bootstrap, group, source, 2) == {}
    done = subprocess.run(
        [node, "transactions.mjs", target.bootstrap, output, source, unique("kjs-id"), group],
        cwd=JS_DIR,
        env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"transactions.mjs exited {done.returncode}:\n{done.stderr}"
    report = json.loads(done.stdout)

    # Partition 0: c0-0..2 at 0..2, commit marker 3, x0-0..1 at 4..5, abort marker 6, last-0 at 7, marker 8.
    # Partition 1: c1-0..1 at 0..1, commit marker 2, last-1 at 3, marker 4.
    # kafkajs lists a send's partitions in the order its answers came back: compare them by partition.
    assert sorted(report["committed"], key=lambda r: r["partition"]) == [
        {"partition": 0, "errorCode": 0, "baseOffset": 0},
        {"partition": 1, "errorCode": 0, "baseOffset": 0},
    ]
    assert report["aborted"] == [{"partition": 0, "errorCode": 0, "baseOffset": 4}]
    assert sorted(report["last"], key=lambda r: r["partition"]) == [
        {"partition": 0, "errorCode": 0, "baseOffset": 7},
        {"partition": 1, "errorCode": 0, "baseOffset": 3},
    ]
    committed_layout = [
        (0, 0, "c0-0"),
        (0, 1, "c0-1"),
        (0, 2, "c0-2"),
        (0, 7, "last-0"),
        (1, 0, "c1-0"),
        (1, 1, "c1-1"),
        (1, 3, "last-1"),
    ]
    assert [(r["partition"], r["offset"], r["value"]) for r in report["records"]] == committed_layout
    assert report["groupOffsets"] == [{"partition": 0, "offset": 10}, {"partition": 1, "offset": 10}]

    assert committed(target.bootstrap, group, source, 2) == {0: 10, 1: 10}
    on_committed = read_all(target.bootstrap, output, 2, READ_COMMITTED)
    assert [(s.partition, s.offset, s.value.decode()) for s in on_committed] == committed_layout
    on_uncommitted = read_all(target.bootstrap, output, 2, READ_UNCOMMITTED)
    assert [(s.partition, s.offset, s.value.decode()) for s in on_uncommitted] == sorted(
        [*committed_layout, (0, 4, "x0-0"), (0, 5, "x0-1")]
    )
