"""The agents' read-only Iceberg REST catalog (api/iceberg/), read by real readers over HTTP: tables made in
the lake's SQL catalog with pyiceberg (two snapshots each), then reached by name through ``/iceberg`` with
pyiceberg's ``RestCatalog`` (on file:// + SQLite and on moto S3 + PostgreSQL) and DuckDB's ``ATTACH ...
(TYPE iceberg)``; writes refused in the spec's error body; 404s for what the catalog does not hold; a
broken metadata file, a database and a store that do not answer, each a clear error and never a 500.
"""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

from api.iceberg.app import create_iceberg_app
from api.iceberg.context import IcebergContext
from api.iceberg.lake import LakeCatalog
from api.iceberg.writes import WRITES
from storage.lake_catalog import open_catalog
from tests.fixtures.lake_tables import current_metadata_file, duckdb_with_iceberg, lake_catalog, make_table
from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration


def _error(answer: httpx.Response, status: int, type_: str) -> str:
    """The spec's IcebergErrorResponse, with ``status`` and ``type``; its message."""
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/json"
    error = answer.json()["error"]
    assert (error["code"], error["type"]) == (status, type_), answer.text
    assert isinstance(error["message"], str)
    assert error["message"]
    return str(error["message"])


def test_pyiceberg_lists_and_loads_tables_by_name(server: RunningServer) -> None:
    expected = make_table(server, "strata.orders")
    make_table(server, "strata.payments")
    catalog = RestCatalog("lake", uri=f"{server.url}/iceberg")
    assert catalog.list_namespaces() == [("strata",)]
    assert catalog.list_namespaces("strata") == []
    assert sorted(catalog.list_tables("strata")) == [("strata", "orders"), ("strata", "payments")]
    assert catalog.namespace_exists("strata")
    assert not catalog.namespace_exists("nope")
    assert catalog.table_exists("strata.orders")
    assert not catalog.table_exists("strata.nope")
    table = catalog.load_table("strata.orders")
    assert len(table.snapshots()) == 2
    assert table.scan().to_arrow().sort_by("id").equals(expected)
    # The first snapshot holds the first append only.
    first = table.snapshots()[0].snapshot_id
    assert table.scan(snapshot_id=first).to_arrow().num_rows == 3
    with pytest.raises(NoSuchTableError):
        catalog.load_table("strata.nope")
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables("nope")


def test_load_table_answers_location_metadata_and_reader_config(server: RunningServer) -> None:
    make_table(server, "strata.orders")
    settings = server.runtime.settings
    with lake_catalog(server) as catalog:
        location = catalog.load_table("strata.orders")
    answer = server.client.get("/iceberg/v1/namespaces/strata/tables/orders")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["metadata-location"] == location.metadata_location
    assert body["metadata"]["table-uuid"] == str(location.metadata.table_uuid)
    assert len(body["metadata"]["snapshots"]) == 2
    if settings.bucket_url.startswith("s3://"):
        # The region is the AWS chain's, as Strata's own S3 client finds it (moto's fixture sets it).
        assert body["config"] == {
            "s3.endpoint": settings.s3_endpoint,
            "s3.path-style-access": "true",
            "s3.region": "us-east-1",
            "client.region": "us-east-1",
        }
    else:
        assert body["config"] == {}


def test_config_names_the_served_endpoints_and_one_warehouse(server: RunningServer) -> None:
    config = server.client.get("/iceberg/v1/config")
    assert config.status_code == 200, config.text
    body = config.json()
    assert body["overrides"] == {}
    assert "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}" in body["endpoints"]
    assert not any(e.startswith(("POST", "DELETE")) for e in body["endpoints"])
    for warehouse in ("", "strata"):
        assert server.client.get("/iceberg/v1/config", params={"warehouse": warehouse}).status_code == 200
    wrong = server.client.get("/iceberg/v1/config", params={"warehouse": "elsewhere"})
    assert "elsewhere" in _error(wrong, 400, "BadRequestException")


def test_writes_are_refused_in_the_spec_format(server: RunningServer) -> None:
    make_table(server, "strata.orders")
    for method, path, operation in WRITES:
        url = "/iceberg" + path.format(namespace="strata", table="orders")
        answer = server.client.request(method, url, json={"name": "t", "schema": {}})
        assert operation in _error(answer, 406, "UnsupportedOperationException")
    other = server.client.put("/iceberg/v1/namespaces/strata/tables/orders", json={})
    _error(other, 405, "MethodNotAllowedException")
    # Nothing changed: the table is there, with its two snapshots.
    catalog = RestCatalog("lake", uri=f"{server.url}/iceberg")
    assert len(catalog.load_table("strata.orders").snapshots()) == 2
    with pytest.raises(NotImplementedError):  # the config's endpoints tell pyiceberg before it asks
        catalog.create_namespace("other")


def test_unknown_namespaces_and_tables_are_404(server: RunningServer) -> None:
    make_table(server, "strata.orders")
    get = server.client.get
    _error(get("/iceberg/v1/namespaces/nope"), 404, "NoSuchNamespaceException")
    _error(get("/iceberg/v1/namespaces/nope/tables"), 404, "NoSuchNamespaceException")
    _error(get("/iceberg/v1/namespaces", params={"parent": "nope"}), 404, "NoSuchNamespaceException")
    _error(get("/iceberg/v1/namespaces/strata/tables/nope"), 404, "NoSuchTableException")
    _error(get("/iceberg/v1/namespaces/nope/tables/orders"), 404, "NoSuchTableException")
    _error(get("/iceberg/v1/namespaces/strata/views"), 404, "NotFoundException")
    assert server.client.head("/iceberg/v1/namespaces/strata/tables/nope").status_code == 404
    assert server.client.head("/iceberg/v1/namespaces/nope").status_code == 404
    assert server.client.head("/iceberg/v1/namespaces/strata/tables/orders").status_code == 204
    assert server.client.head("/iceberg/v1/namespaces/strata").status_code == 204
    bad = get("/iceberg/v1/namespaces", params={"parent": "strata\x1f"})
    _error(bad, 400, "BadRequestException")


def test_a_broken_or_missing_metadata_file_is_a_clear_error(server_factory: Callable[..., Any]) -> None:
    with server_factory() as srv:
        make_table(srv, "strata.broken")
        make_table(srv, "strata.gone")
        current_metadata_file(srv, "strata.broken").write_text('{"format-version": 2, "truncated')
        current_metadata_file(srv, "strata.gone").unlink()
        for name in ("broken", "gone"):
            answer = srv.client.get(f"/iceberg/v1/namespaces/strata/tables/{name}")
            assert "metadata" in _error(answer, 502, "UnreadableMetadataException")
        # The rest of the catalog still answers.
        listed = srv.client.get("/iceberg/v1/namespaces/strata/tables")
        assert sorted(i["name"] for i in listed.json()["identifiers"]) == ["broken", "gone"]


def _unreachable_port() -> int:
    """A port nothing listens on: bound, then closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_a_database_that_does_not_answer_is_503(tmp_path: Path) -> None:
    port = _unreachable_port()
    lake = LakeCatalog(f"postgresql://strata@127.0.0.1:{port}/strata?connect_timeout=2", tmp_path.as_uri())
    with TestClient(create_iceberg_app(IcebergContext(lake, None))) as client:
        for path in ("/v1/namespaces", "/v1/namespaces/strata/tables/orders"):
            _error(client.get(path), 503, "ServiceUnavailableException")
    lake.close()


def test_a_store_that_does_not_answer_is_503(tmp_path: Path, moto_server: str) -> None:
    """The catalog's row points into an S3 bucket whose endpoint does not answer. (``moto_server`` for the
    fake AWS credentials it puts in the environment: without them pyarrow would look for an instance's.)"""
    port = _unreachable_port()
    metadata_url = f"sqlite:///{tmp_path / 'metadata.db'}"
    bucket = "s3://nowhere/strata"
    catalog = open_catalog(metadata_url, bucket, s3_endpoint=f"http://127.0.0.1:{port}")
    catalog.create_namespace("strata")
    catalog.engine.dispose()
    with sqlite3.connect(tmp_path / "metadata.db") as db:
        db.execute(
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location)"
            " VALUES ('strata', 'strata', 'orders', ?)",
            (f"{bucket}/lake/strata/orders/metadata/00000-x.metadata.json",),
        )
    lake = LakeCatalog(metadata_url, bucket, s3_endpoint=f"http://127.0.0.1:{port}", s3_region="us-east-1")
    with TestClient(create_iceberg_app(IcebergContext(lake, None))) as client:
        answer = client.get("/v1/namespaces/strata/tables/orders")
        _error(answer, 503, "ServiceUnavailableException")
        assert client.get("/v1/namespaces/strata/tables").status_code == 200
    lake.close()


def test_duckdb_attaches_the_catalog_and_reads_the_rows(server: RunningServer) -> None:
    """DuckDB, its extensions loaded from the wheels; on S3 with a secret of its own (the catalog vends no
    credentials, only the endpoint)."""
    expected = make_table(server, "strata.orders")
    con = duckdb_with_iceberg()
    endpoint = server.runtime.settings.s3_endpoint
    if endpoint is not None:
        host = endpoint.removeprefix("http://")
        con.execute(
            "CREATE SECRET moto (TYPE s3, KEY_ID 'testing', SECRET 'testing', REGION 'us-east-1',"
            f" ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false)"
        )
    con.execute(
        f"ATTACH '' AS lake (TYPE iceberg, ENDPOINT '{server.url}/iceberg', AUTHORIZATION_TYPE 'none')"
    )
    assert con.execute("SELECT count(*) FROM lake.strata.orders").fetchone() == (5,)
    rows = con.execute("SELECT id, name, amount FROM lake.strata.orders ORDER BY id").fetchall()
    assert rows == [tuple(r.values()) for r in expected.to_pylist()]
