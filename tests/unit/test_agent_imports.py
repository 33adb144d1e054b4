"""What an agent process loads: the compaction runner's numpy and offset map stay out of a process that only
serves (planner/config.py, planner/round.py, storage/records/compression.py), ~15 MiB of its resident set."""

from __future__ import annotations

import subprocess
import sys


def _printed(code: str) -> list[str]:
    """The lines ``code`` prints, run in a fresh interpreter (which must exit 0)."""
    argv = [sys.executable, "-c", code]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_serving_does_not_load_numpy() -> None:
    code = (
        "import sys\n"
        "import strata.server, strata.runtime, broker.server, storage.records.compression\n"
        "from storage.records import compression\n"
        "data = b'x' * 100_000\n"
        "for codec in (compression.LZ4, compression.ZSTD):\n"
        "    assert compression.decompress(codec, compression.compress(codec, data), len(data)) == data\n"
        "print(sorted(m for m in sys.modules if m == 'numpy' or m.startswith('numpy.')))\n"
    )
    assert _printed(code) == ["[]"]


def test_a_compaction_round_still_gets_its_runner() -> None:
    code = (
        "import sys\n"
        "from planner.round import CompactionRound\n"
        "assert 'numpy' not in sys.modules\n"
        "import planner.runner\n"
        "assert 'numpy' in sys.modules\n"
        "assert planner.runner.RunnerConfig is __import__('planner.config').config.RunnerConfig\n"
    )
    _printed(code)


def test_an_http_only_agent_loads_no_kafka_library_nor_the_cli_clients_libraries() -> None:
    """``strata serve --kafka-port -1``: the Kafka door's protocol library (kafka-python imports its whole
    client, ~11 MiB) loads only with a listener, and the CLI's client libraries (httpx, rich) never do."""
    code = (
        "import sys, tempfile\n"
        "import strata.cli, strata.server\n"
        "from strata.runtime import build_runtime\n"
        "from strata.settings import load_settings\n"
        "from strata.http import http_app\n"
        "d = tempfile.mkdtemp()\n"
        "for port in (-1, 0):\n"
        "    runtime = build_runtime(load_settings({'data_dir': d, 'kafka_port': port}))\n"
        "    http_app(runtime)\n"
        "    loaded = [m for m in ('kafka', 'broker.server', 'httpx', 'rich') if m in sys.modules]\n"
        "    print(port, loaded)\n"
        "    runtime.metadata.close()\n"
    )
    assert _printed(code)[:2] == ["-1 []", "0 ['kafka', 'broker.server']"]


def test_an_agent_whose_lake_is_not_read_loads_no_iceberg_library() -> None:
    """The Iceberg catalog is served by every agent, but pyiceberg and SQLAlchemy load only with its first
    request (api/iceberg/lake.py)."""
    code = (
        "import sys, tempfile\n"
        "from strata.runtime import build_runtime\n"
        "from strata.settings import load_settings\n"
        "from strata.http import http_app\n"
        "runtime = build_runtime(load_settings({'data_dir': tempfile.mkdtemp(), 'kafka_port': -1}))\n"
        "http_app(runtime)\n"
        "print([m for m in ('pyiceberg', 'sqlalchemy') if m in sys.modules])\n"
        "runtime.metadata.close()\n"
    )
    assert _printed(code) == ["[]"]


SCHEMA_LIBRARIES = ("google.protobuf", "grpc_tools", "fastavro", "avro", "jsonschema", "confluent_kafka")


def test_schema_libraries_load_with_the_first_schema_of_their_type() -> None:
    """The registry is served by every agent, but each format's libraries load only when a schema of its
    type is first parsed (registry/formats/lazy.py), and confluent-kafka's murmur2 with the first keyed
    record that the agent partitions (storage/partitioner.py): about 18 MiB of an idle agent's memory."""
    code = (
        "import sys, tempfile\n"
        "from strata.runtime import build_runtime\n"
        "from strata.settings import load_settings\n"
        "from strata.http import http_app\n"
        f"names = {SCHEMA_LIBRARIES!r}\n"
        "def loaded(): return [m for m in names if m in sys.modules]\n"
        "runtime = build_runtime(load_settings({'data_dir': tempfile.mkdtemp(), 'kafka_port': 0}))\n"
        "http_app(runtime)\n"
        "print(loaded())\n"
        "runtime.schema_registry().register('t-value', '\"string\"')\n"
        "print(loaded())\n"
        "from storage.partitioner import partition_for_key\n"
        "partition_for_key(b'k', 3)\n"
        "print(loaded())\n"
        "runtime.metadata.close()\n"
    )
    assert _printed(code)[:3] == [
        "[]",
        "['fastavro', 'avro']",
        "['fastavro', 'avro', 'confluent_kafka']",
    ]


def test_werkzeug_loads_with_the_registrys_first_negotiation() -> None:
    """The registry's content negotiation parses headers with werkzeug, whose package imports its server,
    test client and wrappers (about 2 MiB of a built agent): it loads with the first header the registry
    reads."""
    code = (
        "import sys, tempfile\n"
        "from strata.runtime import build_runtime\n"
        "from strata.settings import load_settings\n"
        "from strata.http import http_app\n"
        "import broker.server\n"
        "runtime = build_runtime(load_settings({'data_dir': tempfile.mkdtemp(), 'kafka_port': 0}))\n"
        "http_app(runtime)\n"
        "print('werkzeug' in sys.modules)\n"
        "from api.registry.negotiation import answer_type\n"
        "print(answer_type('application/json;q=0.5, */*;q=.2'))\n"
        "print('werkzeug' in sys.modules)\n"
        "runtime.metadata.close()\n"
    )
    assert _printed(code)[:3] == ["False", "application/json", "True"]


def test_an_async_s3_store_loads_no_boto3() -> None:
    """An agent's I/O goes through its async store (aiobotocore); boto3, with s3transfer, loads only with
    the first synchronous client (storage/objectstore/s3.py), in the worker and the CLI's commands."""
    code = (
        "import sys\n"
        "from storage.objectstore import open_async_object_store, open_object_store\n"
        "url, where = 's3://strata-imports', {'endpoint_url': 'http://127.0.0.1:9', 'region': 'us-east-1'}\n"
        "open_async_object_store(url, **where)\n"
        "store = open_object_store(url, retry=None, **where)\n"
        "print('boto3' in sys.modules)\n"
        "store._client\n"
        "print('boto3' in sys.modules)\n"
    )
    assert _printed(code)[:2] == ["False", "True"]
