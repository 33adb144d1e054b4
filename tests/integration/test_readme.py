"""The README's short tour, run by the shell as written against a real agent: the HTTP examples with curl,
the Kafka one with kcat, the transactional copy with confluent-kafka, and the Avro producer against the
schema registry. Only the addresses change (the test agent listens on free ports); each output shown must be
what the command prints, record timestamps aside."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.fixtures.docs import README, examples, section
from tests.fixtures.registry_kafka import consume
from tests.fixtures.server import local_settings, run_server

pytestmark = pytest.mark.integration


def _shell(script: str) -> str:
    done = subprocess.run(["bash", "-ec", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _timeless(value: Any) -> Any:
    """``value`` with every record timestamp set to 0: they are the time the example ran."""
    if isinstance(value, dict):
        return {k: 0 if k == "timestamp" else _timeless(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def test_the_tour_runs_as_written(tmp_path: Path) -> None:
    for tool in ("curl", "kcat"):
        assert shutil.which(tool) is not None, f"{tool} is not installed (the Makefile's {tool} step)"
    http = examples(section(README, "### HTTP"))
    kafka = examples(section(README, "### Kafka"))
    assert len(http) == 3, "create, produce, fetch"
    # The first Kafka example is kcat's; Kafka's own tool, after it, runs in tests/java/test_readme_java.py.
    assert kafka
    assert "kcat" in kafka[0][0]
    with run_server(local_settings(tmp_path)) as srv:
        # The create prints the topic; the produce and fetch show their answers.
        (create, nothing), *shown = http
        assert nothing is None
        created = json.loads(_shell(create.replace("http://127.0.0.1:8080", srv.url)))
        assert created["name"] == "orders"
        assert len(created["partitions"]) == 3
        for command, output in shown:
            assert output is not None, f"no output shown under {command!r}"
            got = json.loads(_shell(command.replace("http://127.0.0.1:8080", srv.url)))
            assert _timeless(got) == _timeless(json.loads(output))
            assert all(r["timestamp"] > 0 for r in got.get("records", []))

        command, output = kafka[0]
        assert output is not None
        printed = _shell(command.replace("127.0.0.1:9092", srv.kafka_bootstrap))
        assert printed.splitlines() == output.splitlines()

        # The transactional copy, with the Python that runs the tests (confluent-kafka is installed).
        ((copy, shown),) = examples(section(README, "### Kafka"), "python")
        assert shown is not None
        done = subprocess.run(
            [sys.executable, "-c", copy.replace("127.0.0.1:9092", srv.kafka_bootstrap)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == shown.splitlines()
        shouts = _shell(
            f"kcat -b {srv.kafka_bootstrap} -C -t shouts -o beginning -e -X isolation.level=read_committed"
            " -f '%k %s\\n'"
        )
        assert shouts.splitlines() == ["k1 HELLO", "k2 WORLD"]


def test_the_registry_example_runs_as_written(tmp_path: Path) -> None:
    """The Avro producer, with the Python that runs the tests; then its records read back through the
    Kafka door and deserialized against the registry, as the consumer the README mentions would."""
    ((produce, shown),) = examples(section(README, "### Schema registry"), "python")
    assert shown is not None
    with run_server(local_settings(tmp_path)) as srv:
        script = produce.replace("http://127.0.0.1:8081", srv.registry_url)
        script = script.replace("127.0.0.1:9092", srv.kafka_bootstrap)
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == shown.splitlines()
        with SchemaRegistryClient({"url": srv.registry_url}) as registry:
            deserialize = AvroDeserializer(registry)
            context = SerializationContext("invoices", MessageField.VALUE)
            got = [
                (m.key(), deserialize(m.value(), context))
                for m in consume(srv.kafka_bootstrap, "invoices", 2)
            ]
    assert got == [(b"i-1", {"id": "i-1", "cents": 4200}), (b"i-2", {"id": "i-2", "cents": 700})]


# The README installs DuckDB's iceberg extension from DuckDB's repository; the test loads the same
# extensions from their PyPI wheels, offline (tests/fixtures/duck.py).
_ONLINE_EXTENSION = (
    'con.install_extension("iceberg")  # once, from DuckDB\'s extension repository\n'
    'con.load_extension("iceberg")\n'
)


def test_the_lake_example_runs_as_written(tmp_path: Path) -> None:
    """A topic becoming an Iceberg table: created and produced to with curl, committed with ``strata lake
    run``, then queried by DuckDB through the agent's Iceberg REST catalog, each output as shown."""
    from tests.fixtures.duck import EXTENSIONS, extension_path

    assert shutil.which("strata") is not None, "the strata command is not on the PATH (make install)"
    section_text = section(README, "### Topics as Iceberg tables")
    ((shell, committed),) = examples(section_text, "sh")
    ((query, rows),) = examples(section_text, "python")
    assert committed is not None
    assert rows is not None
    assert _ONLINE_EXTENSION in query, "the README's DuckDB example no longer installs the extension so"
    offline = "".join(f"con.execute(\"LOAD '{extension_path(name)}'\")\n" for name in EXTENSIONS)
    settings = local_settings(tmp_path, lake=False)
    with run_server(settings) as srv:
        script = shell.replace("http://127.0.0.1:8080", srv.url).replace("./data", settings.data_dir)
        assert _shell(script).splitlines() == committed.splitlines()
        code = query.replace(_ONLINE_EXTENSION, offline).replace("http://127.0.0.1:8080", srv.url)
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == rows.splitlines()
