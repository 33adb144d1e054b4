"""The ``strata`` commands that are HTTP clients of a running server: topics, produce and consume.

They speak only the public HTTP API (--url, or STRATA_URL; default http://127.0.0.1:8080), with an optional
bearer token (--token, or STRATA_TOKEN).

httpx and rich are imported by the commands that use them, not with this module: ``strata serve`` builds the
same parser, and a server process has no use for either (a few MiB of its memory).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import orjson

if TYPE_CHECKING:
    import httpx
    from rich.console import Console

DEFAULT_URL = "http://127.0.0.1:8080"


@functools.cache
def stderr_console() -> Console:
    """The console for progress and messages, on stderr (stdout carries consumed records)."""
    from rich.console import Console

    return Console(stderr=True)


# --- HTTP client helpers --------------------------------------------------------------------------------
class ClientError(Exception):
    """A non-2xx answer from the server, printed as ``error <code>: <message>``."""


def _http_errors(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command whose transport failures (no server, a timeout) are a ``ClientError`` saying where."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        import httpx

        try:
            return command(args)
        except httpx.HTTPError as exc:
            raise ClientError(f"cannot reach {args.url}: {exc}") from exc

    return run


def _client(args: argparse.Namespace) -> httpx.Client:
    import httpx

    headers = {}
    if args.token:
        headers["Authorization"] = f"Bearer {args.token}"
    return httpx.Client(base_url=args.url, headers=headers, timeout=httpx.Timeout(60.0))


def _check(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            body = response.json()
            raise ClientError(f"error {body['error_code']}: {body['message']}")
        except (ValueError, KeyError, TypeError):
            raise ClientError(f"HTTP {response.status_code}: {response.text[:200]}") from None
    if response.status_code == 204 or not response.content:
        return None
    return response.json()


def _parse_config(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise ClientError(f"--config takes name=value, got {pair!r}")
        out[name] = value
    return out


# --- topics ---------------------------------------------------------------------------------------------
@_http_errors
def cmd_topics_create(args: argparse.Namespace) -> int:
    with _client(args) as client:
        body = {"name": args.name, "partitions": args.partitions, "configs": _parse_config(args.config)}
        _check(client.post("/v1/topics", json=body))
    print(f"created topic {args.name} with {args.partitions} partition(s)")
    return 0


@_http_errors
def cmd_topics_list(args: argparse.Namespace) -> int:
    with _client(args) as client:
        for name in _check(client.get("/v1/topics"))["topics"]:
            print(name)
    return 0


@_http_errors
def cmd_topics_describe(args: argparse.Namespace) -> int:
    with _client(args) as client:
        topic = _check(client.get(f"/v1/topics/{args.name}"))
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{topic['name']}[/bold]")
    configs = Table("config", "value", box=None)
    for name, value in sorted(topic["configs"].items()):
        configs.add_row(name, value)
    console.print(configs)
    parts = Table(
        "partition",
        "log start offset",
        "high watermark",
        "cleaned to",
        "dirty ratio",
        "last compaction",
        box=None,
    )
    for p in topic["partitions"]:
        last = p.get("last_compaction_ms")
        parts.add_row(
            str(p["partition"]),
            str(p["log_start_offset"]),
            str(p["high_watermark"]),
            str(p.get("cleaned_offset", 0)),
            f"{p.get('dirty_ratio', 0.0):.2f}",
            time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(last / 1000)) + " UTC" if last else "never",
        )
    console.print(parts)
    levels = Table("level", "files", "bytes", box=None)
    for level in topic.get("levels", []):
        levels.add_row(f"L{level['level']}", str(level["files"]), str(level["bytes"]))
    console.print(levels)
    return 0


@_http_errors
def cmd_topics_delete(args: argparse.Namespace) -> int:
    with _client(args) as client:
        _check(client.delete(f"/v1/topics/{args.name}"))
    print(f"deleted topic {args.name}")
    return 0


# --- produce --------------------------------------------------------------------------------------------
def _lines(paths: Sequence[str]) -> Iterator[tuple[str, int]]:
    """(line without newline, bytes consumed) from the files, or stdin when none is given."""
    if not paths:
        for line in sys.stdin:
            yield line.rstrip("\n"), len(line)
        return
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                yield line.rstrip("\n"), len(line.encode())


def _record(line: str, separator: str, partition: int | None) -> dict[str, object]:
    key, sep, value = line.partition(separator)
    record: dict[str, object] = {"key": key, "value": value} if sep else {"key": None, "value": line}
    if partition is not None:
        record["partition"] = partition
    return record


@_http_errors
def cmd_produce(args: argparse.Namespace) -> int:
    total = sum(os.path.getsize(p) for p in args.files) if args.files else None
    produced = 0
    from rich.progress import BarColumn, Progress, TextColumn, TransferSpeedColumn

    progress = Progress(
        TextColumn("[bold]producing[/bold] {task.fields[records]} records"),
        BarColumn(),
        TransferSpeedColumn(),
        console=stderr_console(),
        disable=total is None or total < 1024 * 1024 or args.quiet,
    )
    with _client(args) as client, progress:
        task = progress.add_task("produce", total=total, records=0)
        batch: list[dict[str, object]] = []
        nbytes = 0

        def send() -> None:
            nonlocal produced
            _check(client.post(f"/v1/topics/{args.topic}/records", json={"records": batch}))
            produced += len(batch)
            progress.update(task, advance=nbytes, records=produced)

        for line, size in _lines(args.files):
            if not line and args.skip_empty:
                continue
            batch.append(_record(line, args.separator, args.partition))
            nbytes += size
            if len(batch) >= args.batch_size:
                send()
                batch, nbytes = [], 0
        if batch:
            send()
    if not args.quiet:
        stderr_console().print(f"produced {produced} record(s) to {args.topic}")
    return 0


# --- consume --------------------------------------------------------------------------------------------
def _start_offset(spec: str, info: dict[str, int]) -> int:
    if spec == "beginning":
        return info["log_start_offset"]
    if spec == "end":
        return info["high_watermark"]
    try:
        value = int(spec)
    except ValueError:
        raise ClientError(f"--offset takes a number, 'beginning' or 'end'; got {spec!r}") from None
    return info["high_watermark"] + value if value < 0 else value


def _format(record: dict[str, Any], fmt: str, partition: int) -> str:
    return (
        fmt.replace("%k", record["key"] if record["key"] is not None else "")
        .replace("%v", record["value"] if record["value"] is not None else "")
        .replace("%o", str(record["offset"]))
        .replace("%p", str(partition))
        .replace("%T", str(record["timestamp"]))
        .replace("\\t", "\t")
        .replace("\\n", "\n")
    )


@_http_errors
def cmd_consume(args: argparse.Namespace) -> int:
    out: TextIO = sys.stdout
    with _client(args) as client:
        topic = _check(client.get(f"/v1/topics/{args.topic}"))
        parts = [p for p in topic["partitions"] if args.partition is None or p["partition"] == args.partition]
        if not parts:
            raise ClientError(f"partition {args.partition} does not exist")
        positions = {p["partition"]: _start_offset(args.offset, p) for p in parts}
        remaining = args.count
        while True:
            idle = True
            for partition, position in positions.items():
                wait = 1000 if args.follow and len(positions) == 1 else 0
                params: dict[str, str | int] = {"offset": position, "max_wait_ms": wait}
                if args.encoding:
                    params["encoding"] = args.encoding
                url = f"/v1/topics/{args.topic}/partitions/{partition}/records"
                body = _check(client.get(url, params=params))
                for record in body["records"]:
                    if args.json:
                        out.write(orjson.dumps({"partition": partition, **record}).decode() + "\n")
                    else:
                        out.write(_format(record, args.format, partition))
                    if remaining is not None:
                        remaining -= 1
                        if remaining <= 0:
                            out.flush()
                            return 0
                if body["records"] or body["next_offset"] != position:
                    idle = False
                positions[partition] = body["next_offset"]
            out.flush()
            if idle and not args.follow:
                return 0
            if idle and len(positions) > 1:
                time.sleep(0.5)  # several partitions are polled without long-poll


# --- argument parsing -----------------------------------------------------------------------------------
def _add_client_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", default=os.environ.get("STRATA_URL", DEFAULT_URL), help="Strata server (env STRATA_URL)"
    )
    parser.add_argument(
        "--token", default=os.environ.get("STRATA_TOKEN"), help="Bearer token (env STRATA_TOKEN)"
    )


def add_client_commands(sub: Any) -> None:
    """topics, produce and consume."""
    topics = sub.add_parser("topics", help="create, list, describe and delete topics")
    tsub = topics.add_subparsers(dest="topics_command", required=True, metavar="ACTION")
    create = tsub.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument("-p", "--partitions", type=int, default=1, help="number of partitions")
    create.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="topic config, Kafka names (cleanup.policy=compact, retention.ms=...); repeatable",
    )
    create.set_defaults(func=cmd_topics_create)
    lst = tsub.add_parser("list", help="list topic names")
    lst.set_defaults(func=cmd_topics_list)
    describe = tsub.add_parser("describe", help="show a topic's configs and partitions")
    describe.add_argument("name")
    describe.set_defaults(func=cmd_topics_describe)
    delete = tsub.add_parser("delete", help="delete a topic and its data")
    delete.add_argument("name")
    delete.set_defaults(func=cmd_topics_delete)
    for p in (create, lst, describe, delete):
        _add_client_options(p)

    produce = sub.add_parser(
        "produce",
        help="produce lines of KEY<TAB>VALUE",
        description="Produce records from files (or stdin): one record per line, KEY<TAB>VALUE. "
        "A line without the separator is a record with a null key. Shows a progress bar for large files.",
    )
    produce.add_argument("topic")
    produce.add_argument("files", nargs="*", help="input files (default: stdin)")
    produce.add_argument("-s", "--separator", default="\t", help="key/value separator (default: TAB)")
    produce.add_argument("-p", "--partition", type=int, default=None, help="send all records here")
    produce.add_argument("-b", "--batch-size", type=int, default=500, help="records per request")
    produce.add_argument("--skip-empty", action="store_true", help="ignore empty lines")
    produce.add_argument("-q", "--quiet", action="store_true", help="no progress or summary")
    _add_client_options(produce)
    produce.set_defaults(func=cmd_produce)

    consume = sub.add_parser(
        "consume",
        help="print records (like kcat -C)",
        description="Print records from a topic, as kcat -C does: KEY<TAB>VALUE per line by default. "
        "Stops at the end of the log unless --follow is given.",
    )
    consume.add_argument("topic")
    consume.add_argument("-p", "--partition", type=int, default=None, help="only this partition")
    consume.add_argument(
        "-o", "--offset", default="beginning", help="beginning, end, N, or -N (N before the end)"
    )
    consume.add_argument("-f", "--follow", action="store_true", help="wait for new records")
    consume.add_argument("-c", "--count", type=int, default=None, help="stop after this many records")
    consume.add_argument(
        "--format",
        default="%k\\t%v\\n",
        help="output format: %%k key, %%v value, %%o offset, "
        "%%p partition, %%T timestamp (default: %%k\\t%%v\\n)",
    )
    consume.add_argument("--json", action="store_true", help="one JSON object per record")
    consume.add_argument("--encoding", choices=("utf8", "base64"), default=None)
    _add_client_options(consume)
    consume.set_defaults(func=cmd_consume)
