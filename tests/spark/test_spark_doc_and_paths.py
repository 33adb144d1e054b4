"""docs/spark.md's examples as written, and local buckets under awkward directory names."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import pipeline
from pipeline.reader import object_url, read_topic
from storage.keys import key_of
from tests.fixtures.docs import DOCS, ROOT, blocks, section
from tests.fixtures.lake_tables import make_table
from tests.fixtures.server import local_settings, run_server

pytestmark = pytest.mark.integration

PAGE = DOCS / "spark.md"


def _spark_example(heading: str = "## Read a topic") -> str:
    """The Python code block of a section of docs/spark.md, verbatim."""
    (code,) = blocks(section(PAGE, heading), "python")
    return code


def _run_example(code: str, cwd: Path) -> str:
    """What the example prints, run in ``cwd``."""
    out = io.StringIO()
    before = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(PAGE), "exec"), {"__name__": "__doc_example__"})
    finally:
        os.chdir(before)
    return out.getvalue()


def test_pipeline_exports_the_documented_names() -> None:
    from pipeline.reader import latest_per_key as direct

    assert pipeline.latest_per_key is direct
    assert callable(pipeline.read_topic)
    assert callable(pipeline.spark_session)
    with pytest.raises(AttributeError):
        _ = pipeline.no_such_name  # type: ignore[attr-defined]


def test_object_url_is_the_plain_path_with_glob_characters_escaped(tmp_path: Path) -> None:
    bucket = tmp_path / "my checkout" / "50% ü [x]"
    url = object_url(f"file://{bucket}", "data/l0/00ab.strata")
    escaped = str(bucket).replace("[", "\\[").replace("]", "\\]")
    assert url == f"file://{escaped}/data/l0/00ab.strata"
    assert key_of(url) == "data/l0/00ab.strata"


@pytest.mark.parametrize("name", ["my checkout", "50% off", "ünïcødé", "brackets [x] {y}"])
def test_local_bucket_under_an_awkward_directory(spark: Any, tmp_path: Path, name: str) -> None:
    with run_server(local_settings(tmp_path / name)) as srv:
        srv.create_topic("t", partitions=2)
        assert srv.produce("t", [{"key": f"k{i}", "value": f"v{i}"} for i in range(12)]).status_code == 200
        settings = srv.runtime.settings
        assert name in settings.bucket_url
        df = read_topic(spark, settings.metadata_url, settings.bucket_url, subscribe="t")
        rows = {(r.partition, r.offset): (r.key, r.value) for r in df.collect()}
        expected = {
            (p, r["offset"]): (r["key"].encode(), r["value"].encode())
            for p in range(2)
            for r in srv.read_all("t", p)
        }
        assert rows == expected
        assert len(rows) == 12


def test_read_a_topic_example_runs_as_written(spark: Any, tmp_path: Path) -> None:
    checkout = tmp_path / "my checkout"  # the directory of the reported failure
    with run_server(local_settings(checkout)) as srv:
        srv.create_topic("orders", partitions=2)
        for i in range(8):
            record = {
                "key": f"order-{i % 3}",
                "value": f"total {i}",
                "partition": i % 2,
                "headers": [{"name": "source", "value": "web"}],
            }
            assert srv.produce("orders", [record]).status_code == 200
    code = _spark_example()
    assert "from pipeline import" in code  # the documented name, not a submodule
    shown = _run_example(code, checkout)  # the example names ./data, as after `make run` in a checkout
    # startingOffsets {"0":2,"1":-2}: partition 0 (totals 0, 2, 4, 6) from offset 2, partition 1
    # (totals 1, 3, 5, 7) from the earliest. show() prints the latest-per-key values as hex bytes.
    assert {i for i in range(8) if f"total {i}" in shown} == {1, 3, 4, 5, 6, 7}
    assert "order-0" in shown


def test_read_the_lakes_tables_example_runs_against_an_agent(spark: Any, tmp_path: Path) -> None:
    """The example as written but for the agent's port: the session the test process already has takes the
    catalog's settings (runtime settings: Spark applies them to an existing session)."""
    code = _spark_example("## Read the lake's tables")
    documented = "http://127.0.0.1:8080/iceberg"
    assert documented in code
    with run_server(local_settings(tmp_path)) as srv:
        make_table(srv, "strata.orders")
        shown = _run_example(code.replace(documented, f"{srv.url}/iceberg"), tmp_path)
    assert "|   strata|   orders|" in shown  # SHOW TABLES
    assert "|  3|   c|  NULL|" in shown  # the table's rows
    assert "|       3|" in shown  # the first snapshot's count


def test_spark_submit_runs_the_documented_entry_point(tmp_path: Path) -> None:
    """docs/spark.md: ``spark-submit scripts/spark_compact.py [the same options]``."""
    import pyspark

    documented = section(PAGE, "## Compaction on Spark")
    assert "`spark-submit scripts/spark_compact.py [the same options]`" in documented

    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    with run_server(local_settings(tmp_path / "my checkout")) as srv:
        srv.create_topic("cc", **{"cleanup.policy": "compact"})
        for i in range(3):
            assert srv.produce("cc", [{"key": "k", "value": str(i)}]).status_code == 200
        data_dir = srv.runtime.settings.data_dir
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        script = ROOT / "scripts" / "spark_compact.py"
        argv = [str(spark_submit), "--master", "local[1]", str(script), "--topic", "cc", "--force"]
        done = subprocess.run(
            [*argv, "--data-dir", data_dir], env=env, capture_output=True, text=True, timeout=240, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "1 job(s) ran on Spark (local[1])" in done.stdout
        assert [r["value"] for r in srv.read_all("cc", 0)] == ["2"]
