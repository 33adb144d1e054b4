"""``strata lake list|show|commit-now``: the lake of a running server, from the command line.

- ``list`` prints every lake table the caller may see: topic, mode, table, lag (offsets and seconds), last
  commit;
- ``show --topic T`` prints one topic's status: its table, last commit and run, error, what its tables
  hold and the requests the lake sent for them, and each partition's committed offset and lag;
- ``commit-now --topic T`` asks for the table's commit at the next lake round, whatever its interval.

Like the other client commands (strata/client_commands.py) they speak HTTP to a running server (--url, or
STRATA_URL) with its bearer token (--token, or STRATA_TOKEN): ``GET /v1/lake``, ``GET /v1/topics/{t}/lake``
and ``POST /v1/topics/{t}/lake/commit-now``, allowed or refused by the same permissions. ``--json`` prints
the server's answer as it is. ``strata lake run`` (strata/lake_commands.py) is the other kind: it runs a
round in this process.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import orjson

from strata.client_commands import _add_client_options, _check, _client, _http_errors

PAGE = 1000  # the server's largest page of GET /v1/lake


def _when(ms: int | None) -> str:
    if ms is None:
        return "never"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _lag(status: dict[str, Any]) -> str:
    return f"{status['lag_records']} offsets, {status['lag_seconds']:.1f}s"


def _print_table(rows: list[tuple[Any, ...]]) -> None:
    """Columns aligned on the widest cell; the last one is not padded."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    for row in cells:
        print("  ".join([c.ljust(w) for c, w in zip(row[:-1], widths, strict=False)] + [row[-1]]))


def _path(topic: str, *rest: str) -> str:
    return "/".join(["/v1/topics", quote(topic, safe=""), "lake", *rest])


@_http_errors
def cmd_list(args: argparse.Namespace) -> int:
    tables: list[dict[str, Any]] = []
    after: str | None = None
    with _client(args) as client:
        while True:  # every page
            params: dict[str, str | int] = {"limit": PAGE}
            if after is not None:
                params["after"] = after
            page = _check(client.get("/v1/lake", params=params))
            tables += page["tables"]
            after = page.get("next_after")
            if after is None:
                break
    if args.json:
        print(orjson.dumps(tables).decode())
        return 0
    rows: list[tuple[Any, ...]] = [("TOPIC", "MODE", "TABLE", "LAG", "LAST COMMIT", "ERROR")]
    for t in tables:
        error = "yes" if t["last_error"] else "-"
        rows.append((t["topic"], t["mode"], t["table"], _lag(t), _when(t["last_commit_ms"]), error))
    _print_table(rows)
    return 0


@_http_errors
def cmd_show(args: argparse.Namespace) -> int:
    with _client(args) as client:
        status = _check(client.get(_path(args.topic)))
    if args.json:
        print(orjson.dumps(status).decode())
        return 0
    print(f"topic: {status['topic']}")
    print(f"mode: {status['mode']}")
    if status["table"] is None:
        print("table: none (set strata.iceberg.mode to keep the topic as an Iceberg table)")
        return 0
    print(f"table: {status['table']}")
    print(f"commit interval: {status['commit_interval_ms']} ms")
    print(f"lag: {_lag(status)}")
    snapshot = status["last_snapshot_id"]
    print(f"last commit: {_when(status['last_commit_ms'])}" + (f" (snapshot {snapshot})" if snapshot else ""))
    run = status["last_run"]
    if run is not None:
        print(f"last run: {_when(run['at_ms'])}, left {run['lag_records']} offsets behind")
    print(f"last error: {status['last_error'] or '-'}")
    print(f"commit requested: {'yes' if status['commit_requested'] else 'no'}")
    stored = status["stored"]
    print(
        f"stored: {stored['bytes']} bytes in {stored['files']} files" if stored else "stored: not listed yet"
    )
    print("requests: " + ", ".join(f"{n} {kind.upper()}" for kind, n in status["requests"].items()))
    rows: list[tuple[Any, ...]] = [("PARTITION", "COMMITTED", "LSO", "LAG", "LAG SECONDS")]
    for p in status["partitions"]:
        committed = "-" if p["committed_offset"] is None else p["committed_offset"]
        rows.append(
            (p["partition"], committed, p["last_stable_offset"], p["lag_records"], f"{p['lag_seconds']:.1f}")
        )
    _print_table(rows)
    return 0


@_http_errors
def cmd_commit_now(args: argparse.Namespace) -> int:
    with _client(args) as client:
        answer = _check(client.post(_path(args.topic, "commit-now")))
    print(f"commit of {answer['topic']} ({answer['table']}) asked for: the next lake round commits it")
    return 0


def add_lake_status_commands(commands: Any) -> None:
    """``list``, ``show`` and ``commit-now`` under ``strata lake``."""
    lst = commands.add_parser("list", help="every lake table: topic, mode, table, lag, last commit")
    lst.set_defaults(func=cmd_list)
    show = commands.add_parser("show", help="one topic's lake status, partition by partition")
    show.add_argument("--topic", required=True)
    show.set_defaults(func=cmd_show)
    now = commands.add_parser(
        "commit-now", help="commit the topic's table at the next lake round, whatever its interval"
    )
    now.add_argument("--topic", required=True)
    now.set_defaults(func=cmd_commit_now)
    for parser in (lst, show):
        parser.add_argument("--json", action="store_true", help="print the server's JSON")
    for parser in (lst, show, now):
        _add_client_options(parser)
