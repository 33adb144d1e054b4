"""The Iceberg catalog's authentication and permissions: the agent's own principals (a bearer token, which
pyiceberg's ``RestCatalog`` sends for ``token`` and DuckDB for its secret's ``TOKEN``, or HTTP Basic) and
the one permission table, with the lake's tables as a resource (TABLE, ``<namespace>.<table>``).

- The table walked (as tests/integration/test_permission_table_http.py walks Strata's routes): every route
  of the catalog's app has an entry in ``ICEBERG``; for each need, a principal holding every permission
  but that one is refused with 403 ``ForbiddenException`` (or, where the need filters, does not see the
  table), and with exactly that one is not; open routes answer any principal, and no route answers
  without credentials.
- Real readers with tokens: none is 401, a token without the grant 403, with it the rows.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from fastapi.routing import APIRoute
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError, UnauthorizedError

from agents.permissions import ICEBERG, Need
from api.iceberg.app import create_iceberg_app
from tests.fixtures.lake_tables import duckdb_with_iceberg, make_table
from tests.fixtures.permissions import PROBE, PROBE_PASSWORD, PROBE_TOML, everything_but, only_just, set_acls
from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration

AUTH = {"Authorization": "Basic " + base64.b64encode(f"{PROBE}:{PROBE_PASSWORD}".encode()).decode()}
TABLE = "strata.walk"


@pytest.fixture
def walked(server_factory: Callable[..., Any], tmp_path: Path) -> Iterator[RunningServer]:
    path = tmp_path / "probe.toml"
    path.write_text(PROBE_TOML)
    with server_factory(principals_file=str(path), kafka_port=-1) as srv:
        make_table(srv, TABLE)
        yield srv


def test_every_route_has_an_entry(walked: RunningServer) -> None:
    found: set[tuple[str, str]] = set()
    routes = list(create_iceberg_app(walked.runtime.iceberg_context()).routes)
    while routes:
        r = routes.pop()
        if isinstance(r, APIRoute):
            found |= {(m, r.path) for m in r.methods}
        else:  # FastAPI's included router: the routes of the router it includes
            routes += r.original_router.routes  # type: ignore[attr-defined]
    assert found == set(ICEBERG), "a route without a permission entry, or an entry without a route"


def _url(walked: RunningServer, path: str) -> str:
    return walked.url + "/iceberg" + path.format(namespace="strata", table="walk")


def _denied(walked: RunningServer, method: str, path: str, need: Need) -> bool:
    answer = httpx.request(method, _url(walked, path), headers=AUTH)
    if need.filters:
        assert answer.status_code == 200, answer.text
        return TABLE.split(".")[1] not in [i["name"] for i in answer.json()["identifiers"]]
    if answer.status_code == 403:
        if method != "HEAD":  # a HEAD answer has no body
            error = answer.json()["error"]
            assert (error["type"], error["code"]) == ("ForbiddenException", 403), answer.text
            assert PROBE in error["message"]
            assert TABLE in error["message"]
        return True
    assert answer.status_code in (200, 204), (method, path, answer.text)
    return False


def test_each_need_is_enforced(walked: RunningServer) -> None:
    checked = 0
    for (method, path), rule in sorted(ICEBERG.items()):
        for need in rule.needs:
            set_acls(walked.runtime, everything_but(need))
            assert _denied(walked, method, path, need), (method, path, need.describe())
            set_acls(walked.runtime, only_just(need))
            assert not _denied(walked, method, path, need), (method, path, "refused with all")
            checked += 1
    assert checked == sum(len(r.needs) for r in ICEBERG.values())
    assert checked > 0


def test_open_routes(walked: RunningServer) -> None:
    set_acls(walked.runtime, [])
    for (method, path), rule in sorted(ICEBERG.items()):
        url = _url(walked, path)
        without = httpx.request(method, url)
        assert without.status_code == 401, (method, path)
        if method != "HEAD":
            assert without.json()["error"]["type"] == "NotAuthorizedException"
        if rule.needs:
            continue
        assert rule.open, path
        answer = httpx.request(method, url, headers=AUTH)
        expected = {"GET": 200, "HEAD": 204}.get(method, 406)  # every write is refused to everyone
        assert answer.status_code == expected, (method, path, answer.text)


TOML = """
[principals.admin]
password = "admin-pw-4d1e"
superuser = true

# Reads the orders tables, with a token for its readers.
[principals.analyst]
password = "analyst-pw-7a2c"
tokens = ["analyst-token-5b9f"]
tables = { read = ["strata.orders"] }

# Authenticates, and may read no table.
[principals.outsider]
password = "outsider-pw-0c3d"
tokens = ["outsider-token-1e8a"]
topics = { read = ["*"] }
"""


def test_readers_with_and_without_a_grant(server_factory: Callable[..., Any], tmp_path: Path) -> None:
    (tmp_path / "principals.toml").write_text(TOML)
    with server_factory(principals_file=str(tmp_path / "principals.toml"), kafka_port=-1) as srv:
        expected = make_table(srv, "strata.orders")
        make_table(srv, "strata.payments")
        uri = f"{srv.url}/iceberg"

        with pytest.raises(UnauthorizedError):
            RestCatalog("lake", uri=uri)
        with pytest.raises(UnauthorizedError):
            RestCatalog("lake", uri=uri, token="not-a-token")

        outsider = RestCatalog("lake", uri=uri, token="outsider-token-1e8a")
        assert outsider.list_namespaces() == [("strata",)]
        assert outsider.list_tables("strata") == []
        with pytest.raises(ForbiddenError):
            outsider.load_table("strata.orders")

        analyst = RestCatalog("lake", uri=uri, token="analyst-token-5b9f")
        assert analyst.list_tables("strata") == [("strata", "orders")]
        assert analyst.load_table("strata.orders").scan().to_arrow().sort_by("id").equals(expected)
        with pytest.raises(ForbiddenError):
            analyst.load_table("strata.payments")

        # The same over plain HTTP, Basic auth too.
        load = f"{uri}/v1/namespaces/strata/tables/orders"
        assert httpx.get(load).status_code == 401
        assert httpx.get(load, auth=("outsider", "outsider-pw-0c3d")).status_code == 403
        assert httpx.get(load, auth=("analyst", "analyst-pw-7a2c")).status_code == 200
        assert httpx.get(load, auth=("admin", "admin-pw-4d1e")).status_code == 200

        # A TABLE ACL added at run time, over Strata's own ACL API, is in force at once.
        acl = {"resource_type": "TABLE", "resource_name": "strata.orders", "principal": "User:outsider"}
        created = httpx.post(
            f"{srv.url}/v1/acls",
            json={"acls": [{**acl, "operation": "READ"}]},
            auth=("admin", "admin-pw-4d1e"),
        )
        assert created.status_code == 201, created.text
        assert outsider.list_tables("strata") == [("strata", "orders")]
        assert outsider.load_table("strata.orders").scan().to_arrow().num_rows == expected.num_rows


def test_duckdb_with_a_token(server_factory: Callable[..., Any], tmp_path: Path) -> None:
    (tmp_path / "principals.toml").write_text(TOML)
    with server_factory(principals_file=str(tmp_path / "principals.toml"), kafka_port=-1) as srv:
        make_table(srv, "strata.orders")
        make_table(srv, "strata.payments")
        endpoint = f"{srv.url}/iceberg"

        unauthenticated = duckdb_with_iceberg()
        with pytest.raises(duckdb.Error, match="401"):
            unauthenticated.execute(
                f"ATTACH '' AS lake (TYPE iceberg, ENDPOINT '{endpoint}', AUTHORIZATION_TYPE 'none')"
            )

        con = duckdb_with_iceberg()
        con.execute("CREATE SECRET analyst (TYPE iceberg, TOKEN 'analyst-token-5b9f')")
        con.execute(f"ATTACH '' AS lake (TYPE iceberg, ENDPOINT '{endpoint}', SECRET analyst)")
        assert con.execute("SELECT count(*) FROM lake.strata.orders").fetchone() == (5,)
        with pytest.raises(duckdb.Error, match="403"):
            con.execute("SELECT count(*) FROM lake.strata.payments").fetchone()
