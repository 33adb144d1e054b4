"""The lake benchmark's typed phase: what a commit of typed rows costs per format, against a raw commit of
the same bytes, and what each commit writes.

One ``strata serve --role agent`` on the embedded default with its schema registry on a free port. For each
format (Avro, JSON Schema, Protobuf) a topic of ``--typed-partitions`` partitions with
``strata.iceberg.mode=value_schema_id_prefix``, whose values confluent-kafka's serializers
(``AvroSerializer``, ``JSONSerializer``, ``ProtobufSerializer``) write against the agent's registry, which
they register with: an order of four fields (``bench.schema_validation_bench``'s: a long, a string, an int
and a double). Beside them a raw topic (``strata.iceberg.mode=raw``) of the Avro values. Each topic gets a
first commit of ``WARM_RECORDS`` records (the table created, its columns evolved from the schema: not
measured), then ``--typed-records`` more records (a pool of 1,000 serialized orders, cycled) and one
forced lake round in this process (``bench.lake_common.LocalLake``): records per second of its wall time
and per CPU second, and the files it created under the warehouse by kind (data, manifest, manifest list,
metadata), each one object written.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness import AgentSpec, free_port, log, start_agent, stop_proc, wait_http
from bench.lake_analysis import describe_files, total_files
from bench.lake_common import Committed, LocalLake, create_topic, lake_configs, produce
from bench.schema_validation_bench import ORDER_AVSC, ORDER_JSON, ORDER_PROTO
from storage.lake_config import MODE_ID_PREFIX

WARM_RECORDS = 100
POOL = 1000
FORMATS = ("Avro", "JSON Schema", "Protobuf")
RAW = "raw (the Avro values)"


def _orders(n: int) -> list[dict[str, Any]]:
    return [
        {"id": i, "item": f"item {i % 97:02d}", "qty": 1 + i % 9, "price": (i % 400) * 1.25} for i in range(n)
    ]


def _serializers(registry_url: str) -> dict[str, Callable[[str, dict[str, Any]], bytes]]:
    """Each format's confluent-kafka serializer, as a function of (topic, order)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from registry.formats import protobuf
    from registry.formats.protobuf_payload import message_class

    client = SchemaRegistryClient({"url": registry_url, "max.retries": 0})
    # The order's message class from the .proto text, built by the registry's own compiler (no protoc).
    order = message_class(protobuf.FORMAT.parse(ORDER_PROTO, []), "bench.Order")
    avro = AvroSerializer(client, json.dumps(ORDER_AVSC))
    json_schema = JSONSerializer(json.dumps({**ORDER_JSON, "title": "bench.Order"}), client)
    proto = ProtobufSerializer(order, client)

    def ctx(topic: str) -> SerializationContext:
        return SerializationContext(topic, MessageField.VALUE)

    return {
        "Avro": lambda topic, o: avro(o, ctx(topic)),
        "JSON Schema": lambda topic, o: json_schema(o, ctx(topic)),
        "Protobuf": lambda topic, o: proto(order(**o), ctx(topic)),
    }


def _topic(kind: str) -> str:
    return "typed-" + kind.split()[0].lower()


def _measure(lake: LocalLake, bootstrap: str, topic: str, values: list[bytes], records: int) -> Committed:
    """The first commit (not measured), then ``records`` records and the measured commit."""
    produce(bootstrap, topic, ((b"k%06d" % i, values[i % len(values)]) for i in range(WARM_RECORDS)))
    lake.commit(topic)
    produce(bootstrap, topic, ((b"k%06d" % i, values[i % len(values)]) for i in range(records)))
    return lake.commit(topic)


def typed_phase(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    port = free_port()
    spec = AgentSpec(
        ["--role", "agent", "--log-level", "warning"],
        kafka_ports=1,
        env={"STRATA_SCHEMA_REGISTRY_PORT": str(port)},
    )
    agent = start_agent(spec, workdir, "typed")
    lake = None
    out: dict[str, Any] = {}
    try:
        assert agent.bootstrap is not None
        registry_url = f"http://127.0.0.1:{port}"
        wait_http(registry_url + "/subjects", agent.proc)
        lake = LocalLake(agent.data_dir)
        serializers = _serializers(registry_url)
        orders = _orders(POOL)
        values = {kind: [serializers[kind](_topic(kind), o) for o in orders] for kind in FORMATS}
        for kind in FORMATS:
            topic = _topic(kind)
            configs = lake_configs(args.interval_ms, MODE_ID_PREFIX)
            create_topic(agent.url, topic, args.typed_partitions, configs)
            log(f"[typed] {kind}: {args.typed_records} records, one commit")
            done = _measure(lake, agent.bootstrap, topic, values[kind], args.typed_records)
            out[kind] = _result(done, values[kind])
        # The Avro values again, to a raw table: what the typed columns cost over the raw ones.
        create_topic(agent.url, "typed-raw", args.typed_partitions, lake_configs(args.interval_ms))
        log(f"[typed] raw: {args.typed_records} records, one commit")
        done = _measure(lake, agent.bootstrap, "typed-raw", values["Avro"], args.typed_records)
        out[RAW] = _result(done, values["Avro"])
    finally:
        if lake is not None:
            lake.close()
        stop_proc(agent.proc, "typed")
    return out


def _result(done: Committed, values: list[bytes]) -> dict[str, Any]:
    run = done.run
    return {
        "rows": run.rows,
        "invalid_records": run.invalid_records,
        "value_bytes_mean": round(sum(map(len, values)) / len(values), 1),
        "chunk_mib": round(run.chunk_bytes / 2**20, 2),
        "wall_s": round(done.wall_s, 3),
        "cpu_s": round(done.cpu_s, 3),
        "records_s": round(run.rows / done.wall_s) if done.wall_s else None,
        "records_per_cpu_s": round(run.rows / done.cpu_s) if done.cpu_s else None,
        "files": done.files,
        "files_total": total_files(done.files),
        "files_described": describe_files(done.files),
    }
