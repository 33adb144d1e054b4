"""Typed lake tables end to end (pipeline/lake/typed_writer.py, dead_letters.py): values produced with
confluent-kafka's serializers against the agent's registry, in Avro, JSON Schema and Protobuf, committed by
the lake writer and read back through DuckDB: the columns and their types are the value schema's (plus the
``strata`` struct), and each row's values and metadata are what was produced.

Then the table's life: an evolution (an added optional field, int widened to long) shows the new column
with NULL for older rows; a record without framing and one whose schema cannot evolve the table land in the
dead-letter table with their reasons while the table advances past them (in one commit read in pieces
too); and a commit that fails between the dead-letter commit and the main one (then a rerun), or two
writers racing there, leave each record once in one table.

One agent on the embedded default (SQLite, a local directory) serves the module: the writer's storage
paths on both backends are tests/integration/test_lake.py's business.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Message
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from pipeline.lake.offsets import committed_offsets
from pipeline.lake.round import DROPPED
from pipeline.lake.runs import COMMITTED, FAILED, LOST_RACE, LakeWriterConfig
from pipeline.lake.writer import LakeWriter
from storage.clock import SystemClock
from storage.errors import Unavailable
from storage.lake_config import dead_letter_table, default_table
from tests.fixtures.duck import connect
from tests.fixtures.registry_kafka import Headers, round_trip
from tests.fixtures.server import RunningServer, local_settings, run_server
from tests.integration.test_registry_serializers import compile_protos, message_class, proto

pytestmark = pytest.mark.integration

MODE = "strata.iceberg.mode"
STRATA = (
    'STRUCT("partition" INTEGER, "offset" BIGINT, "timestamp" TIMESTAMP WITH TIME ZONE,'
    ' timestamp_type INTEGER, "key" BLOB, headers STRUCT("key" VARCHAR, "value" BLOB)[], schema_id INTEGER)'
)
# The order's fields in each format, and the column types DuckDB must show (JSON Schema has one integer).
AVRO_ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "lake",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "cents", "type": "long"},
        {"name": "qty", "type": "int"},
        {"name": "paid", "type": "boolean"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
JSON_ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "lake.Order",
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "cents": {"type": "integer"},
        "qty": {"type": "integer"},
        "paid": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["id", "cents", "qty", "paid", "tags"],
    "additionalProperties": False,
}
PROTO_ORDER = proto(
    "lake",
    "message Order {\n  string id = 1;\n  int64 cents = 2;\n  int32 qty = 3;\n  bool paid = 4;\n"
    "  repeated string tags = 5;\n}\n",
)
TYPES = {
    "avro": ["VARCHAR", "BIGINT", "INTEGER", "BOOLEAN", "VARCHAR[]"],
    "json": ["VARCHAR", "BIGINT", "BIGINT", "BOOLEAN", "VARCHAR[]"],
    "protobuf": ["VARCHAR", "BIGINT", "INTEGER", "BOOLEAN", "VARCHAR[]"],
}
ORDERS = [
    {
        "id": f"o-{i}",
        "cents": 10**12 + i,
        "qty": i,
        "paid": i % 2 == 0,
        "tags": [f"t{j}" for j in range(i % 3)],
    }
    for i in range(6)
]


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with run_server(local_settings(tmp_path_factory.mktemp("lake-typed"))) as server:
        yield server


@pytest.fixture(scope="module")
def registry(srv: RunningServer) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": srv.registry_url, "max.retries": 0}) as client:
        yield client


def ctx(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE, [])


def send(srv: RunningServer, topic: str, values: list[bytes]) -> list[Message]:
    """``values`` produced to partition 0 with keys and headers; the records as a consumer reads them."""
    records: list[tuple[bytes | None, bytes, Headers]] = [
        (f"k{i}".encode(), v, [("n", str(i).encode())]) for i, v in enumerate(values)
    ]
    return round_trip(srv.kafka_bootstrap, topic, records)


def run(srv: RunningServer, topic: str) -> Any:
    (one,) = srv.runtime.lake_round().run_once(topic, force=True).runs
    return one


def table(srv: RunningServer, name: str) -> Any:
    return srv.runtime.lake_round().writer().catalog.load_table(name)


def scan(location: str, columns: str = "*", where: str = "true") -> list[dict[str, Any]]:
    query = f"SELECT {columns} FROM iceberg_scan('{location}') WHERE {where} ORDER BY strata.\"offset\""
    return connect().execute(query).to_arrow_table().to_pylist()


def described(location: str) -> list[tuple[str, str]]:
    rows = connect().execute(f"DESCRIBE SELECT * FROM iceberg_scan('{location}')").fetchall()
    return [(r[0], r[1]) for r in rows]


def metadata_of(msg: Message, schema_id: int) -> dict[str, Any]:
    """The ``strata`` struct a record's row must hold."""
    kind, ms = msg.timestamp()
    return {
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": datetime.fromtimestamp(ms / 1000, UTC),
        "timestamp_type": kind - 1,  # confluent-kafka: 1 CreateTime, 2 LogAppendTime
        "key": msg.key(),
        "headers": [{"key": k, "value": v} for k, v in msg.headers() or []],
        "schema_id": schema_id,
    }


def assert_rows(location: str, sent: list[Message], schema_id: int) -> None:
    rows = scan(location)
    for row in rows:
        row["strata"]["timestamp"] = row["strata"]["timestamp"].astimezone(UTC)
    expected = [{"strata": metadata_of(m, schema_id), **o} for m, o in zip(sent, ORDERS, strict=True)]
    assert rows == expected


def test_each_format_becomes_a_typed_table(
    srv: RunningServer, registry: SchemaRegistryClient, tmp_path: Path
) -> None:
    order = message_class(compile_protos(tmp_path, {"order.proto": PROTO_ORDER}), "lake.Order")
    serializers = {
        "avro": (AvroSerializer(registry, json.dumps(AVRO_ORDER)), ORDERS),
        "json": (JSONSerializer(json.dumps(JSON_ORDER), registry), ORDERS),
        "protobuf": (ProtobufSerializer(order, registry), [order(**o) for o in ORDERS]),
    }
    for kind, (serialize, values) in serializers.items():
        topic = f"typed-{kind}"
        srv.create_topic(topic, 1, **{MODE: "value_schema_id_prefix"})
        sent = send(srv, topic, [serialize(v, ctx(topic)) for v in values])
        done = run(srv, topic)
        assert (done.outcome, done.rows, done.invalid_records, dict(done.offsets)) == (
            COMMITTED,
            6,
            0,
            {0: 6},
        )
        schema_id = registry.get_latest_version(f"{topic}-value").schema_id
        location = table(srv, default_table(topic)).metadata_location
        assert described(location) == [
            ("strata", STRATA),
            *zip(["id", "cents", "qty", "paid", "tags"], TYPES[kind], strict=True),
        ], kind
        assert_rows(location, sent, schema_id)
    # value_schema_latest: bare payloads of the subject's latest schema, the message named by the mode.
    topic = "typed-latest"
    schema_id = registry.register_schema("orders-shared", Schema(PROTO_ORDER, "PROTOBUF"))
    mode = "value_schema_latest:subject=orders-shared,protobuf_name=lake.Order"
    # The topic's partition spec over the strata struct's fields.
    spec = "(hour(timestamp), bucket(4, key), partition)"
    srv.create_topic(topic, 1, **{MODE: mode, "strata.iceberg.partition.spec": spec})
    sent = send(srv, topic, [order(**o).SerializeToString() for o in ORDERS])
    assert run(srv, topic).outcome == COMMITTED
    latest = table(srv, default_table(topic))
    assert [(f.name, str(f.transform)) for f in latest.spec().fields] == [
        ("timestamp_hour", "hour"),
        ("key_bucket", "bucket[4]"),
        ("partition", "identity"),
    ]
    assert [latest.schema().find_column_name(f.source_id) for f in latest.spec().fields] == [
        "strata.timestamp",
        "strata.key",
        "strata.partition",
    ]
    assert_rows(latest.metadata_location, sent, schema_id)


def item(*fields: dict[str, Any]) -> str:
    return json.dumps({"type": "record", "name": "Item", "namespace": "lake", "fields": list(fields)})


ITEM_V1 = item({"name": "id", "type": "string"}, {"name": "qty", "type": "int"})
# Backward compatible: qty widened, an optional field added.
ITEM_V2 = item(
    {"name": "id", "type": "string"},
    {"name": "qty", "type": "long"},
    {"name": "note", "type": ["null", "string"], "default": None},
)
# Registered under another subject (the registry would refuse it under the topic's): qty as text.
ITEM_CLASH = item({"name": "id", "type": "string"}, {"name": "qty", "type": "string"})


def dead_letters(srv: RunningServer, topic: str) -> list[tuple[Any, ...]]:
    location = table(srv, dead_letter_table(default_table(topic))).metadata_location
    query = f'SELECT "partition", "offset", value, error FROM iceberg_scan(\'{location}\') ORDER BY "offset"'
    return connect().execute(query).fetchall()


def test_evolution_and_dead_letters_keep_the_table_advancing(
    srv: RunningServer, registry: SchemaRegistryClient
) -> None:
    topic = "typed-evolving"
    srv.create_topic(topic, 1, **{MODE: "value_schema_id_prefix"})
    v1, v2 = AvroSerializer(registry, ITEM_V1), AvroSerializer(registry, ITEM_V2)
    send(srv, topic, [v1({"id": "a", "qty": 1}, ctx(topic))])
    assert run(srv, topic).outcome == COMMITTED
    send(srv, topic, [v2({"id": "b", "qty": 2**40, "note": "n"}, ctx(topic))])
    evolved = run(srv, topic)
    assert (evolved.outcome, evolved.rows, evolved.invalid_records) == (COMMITTED, 1, 0)
    location = table(srv, default_table(topic)).metadata_location
    assert described(location) == [
        ("strata", STRATA),
        ("id", "VARCHAR"),
        ("qty", "BIGINT"),
        ("note", "VARCHAR"),
    ]
    assert scan(location, "id, qty, note") == [
        {"id": "a", "qty": 1, "note": None},
        {"id": "b", "qty": 2**40, "note": "n"},
    ]
    # A value without framing, and one whose schema would turn qty into text: dead letters, with reasons.
    clash = AvroSerializer(registry, ITEM_CLASH)({"id": "c", "qty": "many"}, ctx("clash"))
    clash_id = int.from_bytes(clash[1:5], "big")
    send(srv, topic, [b"garbage", clash, v2({"id": "d", "qty": 3, "note": None}, ctx(topic))])
    mixed = run(srv, topic)
    assert (mixed.outcome, mixed.rows, mixed.invalid_records, dict(mixed.offsets)) == (
        COMMITTED,
        1,
        2,
        {0: 5},
    )
    main = table(srv, default_table(topic))
    assert committed_offsets(main)[0] == {0: 5}
    assert [r["id"] for r in scan(main.metadata_location, "id")] == ["a", "b", "d"]
    (garbage, clashed) = dead_letters(srv, topic)
    assert garbage[:3] == (0, 2, b"garbage")
    assert "no schema id" in garbage[3]
    assert clashed[:3] == (0, 3, clash)
    assert clashed[3] == (
        f"schema id {clash_id} cannot evolve the table: qty: values of type string where the table has int64"
    )
    # With drop, refused records are only counted: no dead-letter table.
    dropping = "typed-dropping"
    srv.create_topic(
        dropping, 1, **{MODE: "value_schema_id_prefix", "strata.iceberg.invalid.record.action": "drop"}
    )
    send(srv, dropping, [b"garbage"])
    dropped = run(srv, dropping)
    assert (dropped.outcome, dropped.rows, dropped.invalid_records, dict(dropped.offsets)) == (
        COMMITTED,
        0,
        1,
        {0: 1},
    )
    catalog = srv.runtime.lake_round().writer().catalog
    assert not catalog.table_exists(dead_letter_table(default_table(dropping)))
    assert committed_offsets(table(srv, default_table(dropping)))[0] == {0: 1}


def test_a_typed_commit_in_pieces_evolves_and_refuses_across_them(
    srv: RunningServer, registry: SchemaRegistryClient
) -> None:
    topic = "typed-pieces"
    srv.create_topic(topic, 1, **{MODE: "value_schema_id_prefix"})
    v1, v2 = AvroSerializer(registry, ITEM_V1), AvroSerializer(registry, ITEM_V2)
    # One send per object: with a write buffer of one byte, each is a piece of the one commit.
    for value in (
        v1({"id": "a", "qty": 1}, ctx(topic)),
        b"garbage",
        v2({"id": "b", "qty": 2**40, "note": "n"}, ctx(topic)),
        b"junk",
        v1({"id": "c", "qty": 3}, ctx(topic)),
    ):
        send(srv, topic, [value])
    runtime = srv.runtime
    catalog = runtime.lake_round().writer().catalog
    tiny = LakeWriter(
        runtime.metadata,
        runtime.store,
        catalog,
        SystemClock(),
        "tiny",
        LakeWriterConfig(write_buffer_bytes=1),
    )
    done = tiny.run(runtime.metadata.get_topic(topic))
    assert (done.outcome, done.rows, done.invalid_records, dict(done.offsets)) == (COMMITTED, 3, 2, {0: 5})
    main = table(srv, default_table(topic))
    (snapshot,) = main.snapshots()
    assert int(snapshot.summary["added-data-files"]) == 3  # one per piece that had typed rows
    assert committed_offsets(main) == ({0: 5}, snapshot.snapshot_id)
    assert scan(main.metadata_location, "id, qty, note") == [
        {"id": "a", "qty": 1, "note": None},
        {"id": "b", "qty": 2**40, "note": "n"},
        {"id": "c", "qty": 3, "note": None},
    ]
    dlq = table(srv, dead_letter_table(default_table(topic)))
    (letters,) = dlq.snapshots()  # the two pieces' letters, in one snapshot
    assert int(letters.summary["added-data-files"]) == 2
    assert committed_offsets(dlq)[0] == {0: 5}
    assert [r[:3] for r in dead_letters(srv, topic)] == [(0, 1, b"garbage"), (0, 3, b"junk")]


class FailBeforeCommit:
    """Stops the writer after the dead-letter commit and the main table's upload, before its commit."""

    def before_commit(self, topic: str, table: Any) -> None:
        raise Unavailable("injected: the writer stops between the upload and the catalog commit")

    def after_commit(self, topic: str, table: Any) -> None:
        pass


def test_a_failed_commit_keeps_dead_letters_exactly_once(
    srv: RunningServer, registry: SchemaRegistryClient
) -> None:
    topic = "typed-crash"
    srv.create_topic(topic, 1, **{MODE: "value_schema_id_prefix"})
    v1 = AvroSerializer(registry, ITEM_V1)
    send(
        srv, topic, [v1({"id": "a", "qty": 1}, ctx(topic)), b"garbage", v1({"id": "b", "qty": 2}, ctx(topic))]
    )
    runtime = srv.runtime
    catalog = runtime.lake_round().writer().catalog
    writer = LakeWriter(
        runtime.metadata, runtime.store, catalog, SystemClock(), "crashing", hook=FailBeforeCommit()
    )
    failed = writer.run(runtime.metadata.get_topic(topic))
    assert failed.outcome == FAILED
    assert "injected" in (failed.error or "")
    dlq = table(srv, dead_letter_table(default_table(topic)))
    assert committed_offsets(dlq)[0] == {0: 3}  # the dead letters landed, the main table did not
    assert committed_offsets(table(srv, default_table(topic))) == ({}, None)
    rerun = run(srv, topic)
    assert (rerun.outcome, rerun.rows, rerun.invalid_records, dict(rerun.offsets)) == (
        COMMITTED,
        2,
        1,
        {0: 3},
    )
    assert len(table(srv, dead_letter_table(default_table(topic))).snapshots()) == 1  # nothing appended again
    assert [r[:3] for r in dead_letters(srv, topic)] == [(0, 1, b"garbage")]
    main = table(srv, default_table(topic))
    assert [r["strata"]["offset"] for r in scan(main.metadata_location, "strata")] == [0, 2]
    # The tables go on from there: a later refusal is appended once.
    send(srv, topic, [b"junk"])
    assert run(srv, topic).outcome == COMMITTED
    assert [r[:3] for r in dead_letters(srv, topic)] == [(0, 1, b"garbage"), (0, 3, b"junk")]
    # A topic whose table name is the dead letters' is refused, never written into them.
    srv.create_topic("typed_crash_dlq", 1, **{MODE: "raw"})
    send(srv, "typed_crash_dlq", [b"x"])
    refused = run(srv, "typed_crash_dlq")
    assert refused.outcome == FAILED
    assert "holds topic 'typed-crash'" in (refused.error or "")
    # Deleting the topic drops both its tables.
    assert srv.client.delete(f"/v1/topics/{topic}").status_code == 204
    assert runtime.lake_round().run_once(topic).removed == [(topic, DROPPED)]
    for name in (default_table(topic), dead_letter_table(default_table(topic))):
        assert not catalog.table_exists(name)
    # A table of that name holding another topic is left alone.
    srv.create_topic("typed-solo", 1, **{MODE: "value_schema_id_prefix"})
    srv.create_topic("typed_solo_dlq", 1, **{MODE: "raw"})
    for name in ("typed-solo", "typed_solo_dlq"):
        send(srv, name, [v1({"id": "a", "qty": 1}, ctx("typed-solo"))])
        assert run(srv, name).outcome == COMMITTED
    assert srv.client.delete("/v1/topics/typed-solo").status_code == 204
    assert runtime.lake_round().run_once("typed-solo").removed == [("typed-solo", DROPPED)]
    assert not catalog.table_exists(default_table("typed-solo"))
    assert catalog.table_exists(dead_letter_table(default_table("typed-solo")))


class RivalBeforeCommit:
    """Runs a rival writer (its clock past the first one's lease) in the first one's window: after the first
    one's dead-letter commit, before its main commit."""

    def __init__(self, rival: LakeWriter, info: Any) -> None:
        self.rival, self.info = rival, info
        self.rival_runs: list[Any] = []

    def before_commit(self, topic: str, table: Any) -> None:
        if not self.rival_runs:
            self.rival_runs.append(self.rival.run(self.info))

    def after_commit(self, topic: str, table: Any) -> None:
        pass


class SkewedClock(SystemClock):
    def now_ms(self) -> int:
        return super().now_ms() + 10 * 60_000


def test_two_writers_racing_keep_dead_letters_exactly_once(
    srv: RunningServer, registry: SchemaRegistryClient
) -> None:
    topic = "typed-raced"
    srv.create_topic(topic, 1, **{MODE: "value_schema_id_prefix"})
    v1 = AvroSerializer(registry, ITEM_V1)
    send(srv, topic, [b"garbage", v1({"id": "a", "qty": 1}, ctx(topic)), b"junk"])
    runtime = srv.runtime
    catalog = runtime.lake_round().writer().catalog
    info = runtime.metadata.get_topic(topic)
    rival = LakeWriter(runtime.metadata, runtime.store, catalog, SkewedClock(), "rival")
    hook = RivalBeforeCommit(rival, info)
    first = LakeWriter(runtime.metadata, runtime.store, catalog, SystemClock(), "first", hook=hook).run(info)
    (won,) = hook.rival_runs
    # The rival found the dead letters committed and skipped them; its main commit won.
    assert (won.outcome, won.rows, won.invalid_records) == (COMMITTED, 1, 2)
    assert first.outcome == LOST_RACE
    assert dict(first.offsets) == dict(won.offsets) == {0: 3}
    assert [r[:3] for r in dead_letters(srv, topic)] == [(0, 0, b"garbage"), (0, 2, b"junk")]
    assert len(table(srv, dead_letter_table(default_table(topic))).snapshots()) == 1
    main = table(srv, default_table(topic))
    assert [r["strata"]["offset"] for r in scan(main.metadata_location, "strata")] == [1]
