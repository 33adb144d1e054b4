"""kafkajs 2.2.4 (Node) producing to a topic that validates schemas.

- tests/kafka/js/schema_validation.mjs: the scenarios of tests/kafka/schema_cases.py with gzip, the codec
  kafkajs ships, values framed by hand;
- tests/kafka/js/schema_registry.mjs: ``@kafkajs/confluent-schema-registry`` registers its schemas through
  the agent's registry and encodes the values.

kafkajs reports a refusal as KafkaJSProtocolError INVALID_RECORD (87), not retriable; it speaks Produce
v7, whose answer has no message, so the agent's message is checked on the wire
(test_schema_validation_wire.py). Afterwards the partitions hold exactly the accepted records, the refused
partition's neighbour in the same request included."""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest

from tests.fixtures.server import RunningServer, local_settings, run_server
from tests.kafka.schema_cases import (
    ORDER,
    PARTITIONS,
    Serialized,
    create_validating,
    scenarios,
    stored,
    values,
)

pytestmark = pytest.mark.integration
JS_DIR = Path(__file__).parent / "js"
REFUSED = {"name": "KafkaJSProtocolError", "type": "INVALID_RECORD", "code": 87, "retriable": False}
REFUSED_MESSAGE = "This record has failed the validation on broker and hence be rejected"
ORDER_SCHEMA = fastavro.parse_schema(ORDER)


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with run_server(local_settings(tmp_path_factory.mktemp("kafkajs-validation"))) as running:
        yield running


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def run_script(script: str, *args: str, stdin: str = "") -> Any:
    node = shutil.which("node")
    assert node is not None, "node is not installed (Node 20: see the Makefile's kafkajs step)"
    for package in ("kafkajs", "@kafkajs/confluent-schema-registry"):
        assert (JS_DIR / "node_modules" / package / "package.json").is_file(), (
            f"{package} is not installed: run `make kafkajs` (npm ci in tests/kafka/js)"
        )
    done = subprocess.run(
        [node, script, *args],
        cwd=JS_DIR,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stderr}"
    return json.loads(done.stdout)


def test_kafkajs_sees_each_refusal_and_only_valid_records_are_stored(srv: RunningServer) -> None:
    topic = "validated-kafkajs"
    create_validating(srv.runtime.metadata, topic)
    with Serialized(srv.registry_prefix_url, topic) as serialized:
        sends = scenarios(topic, serialized, "gzip")
    plan = [
        {
            "name": send.name,
            "codec": send.codec,
            "records": [{"partition": p, "key": b64(k), "value": b64(v)} for p, k, v in send.records],
        }
        for send in sends
    ]
    report = run_script("schema_validation.mjs", srv.kafka_bootstrap, topic, stdin=json.dumps(plan))
    assert [r["name"] for r in report] == [s.name for s in sends]
    for send, result in zip(sends, report, strict=True):
        if not send.refused:
            assert result["ok"] is True, result
            continue
        assert result["ok"] is False, result
        assert result["error"] == {**REFUSED, "message": REFUSED_MESSAGE}
    assert {p: values(srv, topic, p) for p in range(PARTITIONS)} == stored(sends)


def test_kafkajs_with_the_confluent_schema_registry_library(srv: RunningServer) -> None:
    topic = "validated-kafkajs-registry"
    create_validating(srv.runtime.metadata, topic)
    report = run_script("schema_registry.mjs", srv.kafka_bootstrap, srv.registry_url, topic)
    assert [(r["name"], r["ok"]) for r in report["results"]] == [
        ("accepted", True),
        ("tombstone", True),
        ("wrong subject", False),
        ("other partitions", False),
    ]
    assert all(r["error"] == REFUSED for r in report["results"] if not r["ok"])
    # What the library encoded is stored as sent: its framing, and Avro that reads as the orders.
    stored_values = values(srv, topic, 0)
    assert stored_values[-1] is None
    framed_orders = [v for v in stored_values if v is not None]
    assert {v[:5] for v in framed_orders} == {b"\x00" + report["order"].to_bytes(4, "big")}
    assert [fastavro.schemaless_reader(io.BytesIO(v[5:]), ORDER_SCHEMA, None) for v in framed_orders] == [
        {"id": i, "item": f"item-{i}"} for i in (1, 2, 3)
    ]
    (beside,) = values(srv, topic, 1)
    assert beside is not None
    assert beside[:5] == b"\x00" + report["order"].to_bytes(4, "big")
