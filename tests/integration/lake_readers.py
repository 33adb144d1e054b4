"""Independent readers of a lake table, for the lake's tests: DuckDB (C++, its iceberg extension loaded
offline from the PyPI wheel), iceberg-rust (pyiceberg-core's DataFusion table provider) and pyiceberg. Each
returns the table's rows as comparable tuples: (partition, offset, key, value, headers, timestamp in
microseconds, timestampType, topic), sorted."""

from __future__ import annotations

import glob
import importlib.util
import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

Row = tuple[Any, ...]


def _extension(name: str) -> str:
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    assert spec is not None, f"duckdb-extension-{name} is not installed"
    assert spec.origin is not None
    found = glob.glob(
        str(Path(spec.origin).parent / "extensions" / "**" / "*.duckdb_extension"), recursive=True
    )
    assert found, f"no .duckdb_extension file in duckdb-extension-{name}"
    return found[0]


def _micros(value: Any) -> int:
    """A timestamp as microseconds since the epoch, from a datetime or an integer."""
    if isinstance(value, int):
        return value
    return int(value.timestamp()) * 1_000_000 + value.microsecond


def _row(r: dict[str, Any]) -> Row:
    headers = tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"] or [])
    return (
        int(r["partition"]),
        int(r["offset"]),
        None if r["key"] is None else bytes(r["key"]),
        None if r["value"] is None else bytes(r["value"]),
        headers,
        _micros(r["timestamp"]),
        int(r["timestampType"]),
        r["topic"],
    )


def rows_of(arrow_table: Any) -> list[Row]:
    """Rows of an Arrow table with the Kafka source's columns."""
    return sorted(_row(r) for r in arrow_table.to_pylist())


def duckdb_connection(s3_endpoint: str | None = None) -> Any:
    import duckdb

    con = duckdb.connect(
        config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}
    )
    names = ("avro", "iceberg") if s3_endpoint is None else ("httpfs", "avro", "iceberg")
    for name in names:
        con.execute(f"LOAD '{_extension(name)}'")
    if s3_endpoint is not None:
        host = s3_endpoint.removeprefix("http://")
        con.execute(
            "CREATE SECRET moto (TYPE s3, KEY_ID 'testing', SECRET 'testing', REGION 'us-east-1',"
            f" ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false)"
        )
    return con


def duckdb_rows(metadata_location: str, s3_endpoint: str | None = None) -> list[Row]:
    con = duckdb_connection(s3_endpoint)
    try:
        table = con.execute(f"SELECT * FROM iceberg_scan('{metadata_location}')").to_arrow_table()
        return rows_of(table)
    finally:
        con.close()


def duckdb_counts(metadata_location: str, s3_endpoint: str | None = None) -> tuple[int, int]:
    """(count(*), count of distinct (partition, offset)) of the table."""
    con = duckdb_connection(s3_endpoint)
    try:
        row = con.execute(
            'SELECT count(*), count(DISTINCT ("partition", "offset"))'
            f" FROM iceberg_scan('{metadata_location}')"
        ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])
    finally:
        con.close()


def datafusion_rows(table: Any, s3: bool = False) -> list[Row]:
    """Through iceberg-rust: pyiceberg-core's table provider, queried by DataFusion, in a child process.
    Why a child: the provider holds the GIL while its runtime waits on S3, and moto's server runs in this
    process, so it could not answer. On S3 (moto) the reader is given the fake credentials and region
    explicitly, as the DuckDB secret is."""
    properties = dict(table.io.properties)
    if s3:
        properties.update(
            {"s3.access-key-id": "testing", "s3.secret-access-key": "testing", "s3.region": "us-east-1"}
        )
    request = json.dumps(
        {"name": ".".join(table.name()), "location": table.metadata_location, "io": properties}
    )
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration.lake_readers"],
        input=request.encode(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    rows: list[Row] = pickle.loads(done.stdout)
    return rows


def _datafusion_child() -> None:
    import datafusion
    from pyiceberg_core.datafusion import IcebergDataFusionTable

    request = json.loads(sys.stdin.buffer.read())
    provider = IcebergDataFusionTable(
        identifier=tuple(request["name"].split(".")),
        metadata_location=request["location"],
        file_io_properties=request["io"],
    )
    ctx = datafusion.SessionContext()
    ctx.register_table("lake", provider)
    sys.stdout.buffer.write(pickle.dumps(rows_of(ctx.sql("SELECT * FROM lake").to_arrow_table())))


def pyiceberg_rows(table: Any) -> list[Row]:
    return rows_of(table.scan().to_arrow())


if __name__ == "__main__":
    _datafusion_child()
