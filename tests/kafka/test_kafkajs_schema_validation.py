"""kafkajs 2.2.4 (Node) producing to a topic that validates schemas (tests/kafka/js/schema_validation.mjs):
the scenarios of tests/kafka/schema_cases.py with gzip, the codec kafkajs ships. kafkajs reports a
refusal as KafkaJSProtocolError INVALID_RECORD (87), not retriable; it speaks Produce v7, whose answer has
no message, so the agent's message is checked on the wire (test_schema_validation_wire.py). Afterwards the
partitions hold exactly the accepted records, the refused partition's neighbour in the same request
included."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.server import RunningServer, local_settings, run_server
from tests.kafka.schema_cases import PARTITIONS, create_validating, register, scenarios, stored, values

pytestmark = pytest.mark.integration
JS_DIR = Path(__file__).parent / "js"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with run_server(local_settings(tmp_path_factory.mktemp("kafkajs-validation"))) as running:
        yield running


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def run_script(bootstrap: str, topic: str, plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
    node = shutil.which("node")
    assert node is not None, "node is not installed (Node 20: see the Makefile's kafkajs step)"
    assert (JS_DIR / "node_modules" / "kafkajs" / "package.json").is_file(), (
        "kafkajs is not installed: run `make kafkajs` (npm ci in tests/kafka/js)"
    )
    done = subprocess.run(
        [node, "schema_validation.mjs", bootstrap, topic],
        cwd=JS_DIR,
        input=json.dumps(plan),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"schema_validation.mjs exited {done.returncode}:\n{done.stderr}"
    report: list[dict[str, Any]] = json.loads(done.stdout)
    return report


def test_kafkajs_sees_each_refusal_and_only_valid_records_are_stored(srv: RunningServer) -> None:
    topic = "validated-kafkajs"
    create_validating(srv.runtime.metadata, topic)
    ids = register(srv.runtime.metadata, topic)
    sends = scenarios(topic, ids, "gzip")
    plan = [
        {
            "name": send.name,
            "codec": send.codec,
            "records": [{"partition": p, "key": b64(k), "value": b64(v)} for p, k, v in send.records],
        }
        for send in sends
    ]
    report = run_script(srv.kafka_bootstrap, topic, plan)
    assert [r["name"] for r in report] == [s.name for s in sends]
    for send, result in zip(sends, report, strict=True):
        if not send.refused:
            assert result["ok"] is True, result
            continue
        assert result["ok"] is False, result
        assert result["error"] == {
            "name": "KafkaJSProtocolError",
            "type": "INVALID_RECORD",
            "code": 87,
            "retriable": False,
            "message": "This record has failed the validation on broker and hence be rejected",
        }
    assert {p: values(srv, topic, p) for p in range(PARTITIONS)} == stored(sends)
