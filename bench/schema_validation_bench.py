"""What validation on produce costs: Kafka produce with schema id validation against the same load without
it, back to back, and the cost per record of ``payload`` level.

    python -m bench.schema_validation_bench [--producers 2] [--duration 10] [--repeat 3]
    python -m bench.schema_validation_bench --producers 1 --partitions 4 --duration 1 --warmup 0.5 \\
        --repeat 1 --probe-records 200 --probe-seconds 0.1                   # smoke run

1. End to end. One ``strata serve --role agent`` on the embedded default (local directory, SQLite; Kafka on
   a free port) and three topics of ``--partitions`` partitions: ``sv-off`` without validation, ``sv-id``
   with ``confluent.value.schema.validation=true`` (``id`` level), ``sv-payload`` at ``payload`` level. An
   Avro schema, a record of one string field, is registered under both validating topics' subjects through
   the registry's service, on the agent's own metadata store. Windows of ``--duration`` seconds after
   ``--warmup``, alternating (off, id) ``--repeat`` times, then one payload window: ``--producers``
   librdkafka processes (bench/kafka_loadgen.py: closed loop, acks=all, linger.ms 5, 1 MB batches,
   uncompressed) sending the same bytes to each topic, ``--value-bytes`` values framed as Confluent's
   Avro serializer frames them (magic byte 0, the id, the Avro string). Figures: the acknowledged MiB/s of
   each kind of window (the median of its windows), id over off (the target), the agent's CPU per MiB of
   each, and the agent CPU per record that payload level adds over no validation. The agent's
   ``strata_schema_validation_total`` must count every validating window's records as valid and none as
   invalid, or the run says so.
2. Probe, in this process, one core: ``RecordValidator.check`` on one batch of ``--probe-records`` records
   of each format (Avro, JSON Schema, Protobuf; an order of four fields, about 40-70 bytes) at ``id`` and
   at ``payload`` level, from an in-memory lookup: CPU microseconds per record of the check itself,
   repeated for ``--probe-seconds``.

Every process binds 127.0.0.1 and is stopped at the end. Results: a table on stdout, JSON under
bench/results/; with ``--figures``, the page's figures (the Kafka door's area) under bench/figures/.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.harness import AgentSpec, log, start_agent, stop_proc
from bench.kafka_load import KafkaLoad, run_producers
from bench.probes import CpuWindow, cpu_ms_per_mib
from bench.results import Rows, add_output_args, finish_run, markdown_table, page_figures, run_header
from bench.targets import SCHEMA_ID_RATIO
from registry.formats import avro, jsonschema, protobuf
from registry.formats.base import ParsedSchema, SchemaType
from registry.formats.protobuf_payload import encode_framed
from registry.schema_cache import SchemaCache
from registry.service import SchemaRegistry, default_formats
from registry.validate import RecordValidator
from registry.verdicts import FieldRule, Tally
from storage import records
from storage.metadata import open_metadata_store

TEXT_AVSC = json.dumps(
    {"type": "record", "name": "Text", "namespace": "bench", "fields": [{"name": "body", "type": "string"}]}
)
TOPICS = {"off": ("sv-off", {}), "id": ("sv-id", {"confluent.value.schema.validation": "true"})}
TOPICS["payload"] = ("sv-payload", {**TOPICS["id"][1], "strata.value.schema.validation.level": "payload"})

# --- the probe's schemas: one order of four fields in each format ----------------------------------------
ORDER = {"id": 123456, "item": "tea, green, 250 g", "qty": 3, "price": 7.25}
ORDER_AVSC = {
    "type": "record",
    "name": "Order",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "item", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "price", "type": "double"},
    ],
}
ORDER_JSON = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "item": {"type": "string"},
        "qty": {"type": "integer", "minimum": 1},
        "price": {"type": "number"},
    },
    "required": ["id", "item", "qty", "price"],
}
ORDER_PROTO = """syntax = "proto3";
package bench;
message Order { int64 id = 1; string item = 2; int32 qty = 3; double price = 4; }
"""


class _Lookup:
    """The registry's facts for the probe, in memory: id 1 under the probe topic's value subject."""

    def __init__(self, parsed: ParsedSchema) -> None:
        self.parsed = parsed

    def schema(self, schema_id: int) -> ParsedSchema | None:
        return self.parsed if schema_id == 1 else None

    def schema_id(self, guid: str) -> int | None:
        return None

    def subjects(self, schema_id: int) -> frozenset[str]:
        return frozenset({"probe-value"})


def _probe_payloads() -> dict[str, tuple[ParsedSchema, bytes]]:
    """Each format's schema and one order's framed bytes (magic byte, id 1, indexes for Protobuf)."""
    avro_schema = avro.FORMAT.parse(json.dumps(ORDER_AVSC), [])
    body = avro_schema.codec.from_json(ORDER)  # fastavro's writer, as confluent-kafka's AvroSerializer
    json_schema = jsonschema.FORMAT.parse(json.dumps(ORDER_JSON), [])
    proto_schema = protobuf.FORMAT.parse(ORDER_PROTO, [])
    proto = encode_framed(proto_schema, "bench.Order", ORDER)
    prefix = b"\x00\x00\x00\x00\x01"
    return {
        "Avro": (avro_schema, prefix + body),
        "JSON Schema": (json_schema, prefix + json.dumps(ORDER, separators=(",", ":")).encode()),
        "Protobuf": (proto_schema, prefix + proto),
    }


def _us_per_record(work: Callable[[], None], count: int, seconds: float) -> float:
    runs = 0
    started = time.process_time()
    while time.process_time() - started < seconds or runs == 0:
        work()
        runs += 1
    return (time.process_time() - started) * 1e6 / (runs * count)


def _check_once(validator: RecordValidator, data: bytes, rules: list[FieldRule]) -> Callable[[], None]:
    header = records.read_header(data, 0, True)
    count, last = header.records_count, header.last_offset_delta

    def check() -> None:
        start, end = records.RECORD_BATCH_OVERHEAD, header.size
        validator.check("probe", rules, data, start, end, count, last, load=True, tally=Tally())

    return check


def probe(count: int, seconds: float) -> dict[str, dict[str, float]]:
    """CPU microseconds per record of ``RecordValidator.check`` for each format, at id and payload level."""
    out: dict[str, dict[str, float]] = {}
    for name, (parsed, value) in _probe_payloads().items():
        data = records.encode_batch([records.Record(i, 0, b"k", value) for i in range(count)])
        validator = RecordValidator(SchemaCache(_Lookup(parsed), time.monotonic))
        out[name] = {}
        for level in ("id", "payload"):
            rules = [FieldRule("value", "TopicNameStrategy", payload=level == "payload")]
            check = _check_once(validator, data, rules)
            check()  # the schema into the cache, the payload codec built: not what is measured
            out[name][level] = round(_us_per_record(check, count, seconds), 3)
    return out


# --- end to end --------------------------------------------------------------------------------------------
def _prepare(agent_url: str, data_dir: Path, partitions: int) -> int:
    """The three topics, and the schema registered under the validating ones' subjects; its id."""
    for topic, configs in TOPICS.values():
        body = {"name": topic, "partitions": partitions, "configs": configs}
        answer = httpx.post(f"{agent_url}/v1/topics", json=body, timeout=30)
        if answer.status_code != 201:
            raise RuntimeError(f"creating {topic}: {answer.status_code} {answer.text[:300]}")
    store = open_metadata_store(f"sqlite:///{data_dir / 'metadata.db'}")
    try:
        registry = SchemaRegistry(store, default_formats())
        ids = {
            registry.register(f"{t}-value", TEXT_AVSC, SchemaType.AVRO).schema_id
            for t in ("sv-id", "sv-payload")
        }
    finally:
        store.close()
    (schema_id,) = ids
    return schema_id


def _window(args: argparse.Namespace, bootstrap: str, pid: int, kind: str, schema_id: int) -> dict[str, Any]:
    cpu = CpuWindow({"agent": pid})
    load = KafkaLoad("none", args.producers, args.duration, schema_id=schema_id)
    result = run_producers(args, bootstrap, TOPICS[kind][0], load, cpu.mark_start, cpu.mark_end)
    result["cpu_cores"] = cpu.cores()
    return result


def _validated(agent_url: str) -> dict[str, float]:
    """strata_schema_validation_total by topic and result, from the agent's metrics."""
    out: dict[str, float] = {}
    for line in httpx.get(f"{agent_url}/metrics", timeout=10).text.splitlines():
        if line.startswith("strata_schema_validation_total{"):
            labels, _, value = line.rpartition(" ")
            topic = labels.split('topic="', 1)[1].split('"', 1)[0]
            result = labels.split('result="', 1)[1].split('"', 1)[0]
            out[f"{topic} {result}"] = out.get(f"{topic} {result}", 0.0) + float(value)
    return out


def end_to_end(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    serve = ["--role", "agent", "--log-level", "warning", "--flush-interval-ms", str(args.flush_interval_ms)]
    agent = start_agent(AgentSpec(serve, kafka_ports=1), workdir, "agent")
    try:
        assert agent.bootstrap is not None
        schema_id = _prepare(agent.url, agent.data_dir, args.partitions)
        windows: dict[str, list[dict[str, Any]]] = {kind: [] for kind in TOPICS}
        for kind in [*(["off", "id"] * args.repeat), "payload"]:
            log(f"[{kind}] {args.producers} producer processes, {args.duration:g} s")
            windows[kind].append(_window(args, agent.bootstrap, agent.pid, kind, schema_id))
        return {"schema_id": schema_id, "windows": windows, "validated": _validated(agent.url)}
    finally:
        stop_proc(agent.proc, "agent")


def _median(windows: list[dict[str, Any]], key: Callable[[dict[str, Any]], float]) -> float:
    return statistics.median(key(w) for w in windows) if windows else 0.0


def evaluate(e2e: dict[str, Any], probed: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    rows = Rows()
    area = "kafka"
    mib = {k: _median(w, lambda x: x["mib_s"]) for k, w in e2e["windows"].items()}
    records_s = {k: _median(w, lambda x: x["records_s"]) for k, w in e2e["windows"].items()}
    cores = {k: _median(w, lambda x: x["cpu_cores"]["agent"]) for k, w in e2e["windows"].items()}
    rows.add("produce without validation (schema test load), local", round(mib["off"], 1), "MiB/s", area=area)
    rows.add("produce with schema id validation, local", round(mib["id"], 1), "MiB/s", area=area)
    ratio = 100 * mib["id"] / mib["off"] if mib["off"] else 0.0
    rows.add("schema id validation / none, produce, local", round(ratio, 1), "%", SCHEMA_ID_RATIO, area=area)
    rows.add("produce with payload validation (Avro), local", round(mib["payload"], 1), "MiB/s", area=area)
    for kind in TOPICS:
        rows.add(
            f"agent CPU per MiB produced, validation {kind}", cpu_ms_per_mib(cores[kind], mib[kind]), "ms"
        )
    if records_s["payload"] and records_s["off"]:
        extra = cores["payload"] / records_s["payload"] - cores["off"] / records_s["off"]
        rows.add(
            "agent CPU per record, payload validation over none (Avro)",
            round(extra * 1e6, 2),
            "µs",
            area=area,
        )
    errors = {k: sum(sum(x["errors"].values()) for x in w) for k, w in e2e["windows"].items()}
    rows.add(
        "failed deliveries (off; id; payload)",
        "; ".join(str(errors[k]) for k in TOPICS),
        target="= 0",
        ok=not any(errors.values()),
    )
    counted = e2e["validated"]
    invalid = counted.get("sv-id invalid", 0) + counted.get("sv-payload invalid", 0)
    valid = (counted.get("sv-id valid", 0), counted.get("sv-payload valid", 0))
    rows.add(
        "records validated (id; payload)",
        f"{valid[0]:.0f}; {valid[1]:.0f}",
        target="> 0, none invalid",
        ok=min(valid) > 0 and not invalid,
    )
    for name, levels in probed.items():
        rows.add(f"check per record, id level, {name} (probe)", levels["id"], "µs")
        rows.add(f"check per record, payload level, {name} (probe)", levels["payload"], "µs", area=area)
    return rows.rows


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--producers", type=int, default=2, help="producer processes")
    add("--partitions", type=int, default=12)
    add("--duration", type=float, default=10.0, help="measured window, s")
    add("--warmup", type=float, default=2.0)
    add("--repeat", type=int, default=3, help="(off, id) window pairs")
    add("--value-bytes", type=int, default=1024)
    add("--flush-interval-ms", type=int, default=250)
    add("--probe-records", type=int, default=1000)
    add("--probe-seconds", type=float, default=1.0)
    add_output_args(parser, "schema_validation_bench")
    args = parser.parse_args(argv)
    # What bench.kafka_load's producers read from the command line of bench.kafka_bench.
    args.value_kind, args.linger_ms, args.batch_bytes, args.queue_mib = "text", 5.0, 1_000_000, 64
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    report = run_header(
        "schema_validation_bench", argv, ("agents", "broker", "registry", "storage", "strata")
    )
    report["params"] = vars(args)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="strata-sv-bench-") as tmp:
        e2e = end_to_end(args, Path(tmp))
    log("[probe] the check in this process")
    probed = probe(args.probe_records, args.probe_seconds)
    report.update(end_to_end=e2e, probe=probed, targets=evaluate(e2e, probed))
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    finish_run(report, args, lambda r: print(markdown_table(r["targets"])), page_figures(report["targets"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
