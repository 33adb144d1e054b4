"""``strata schemas``: the schema registry of a running server, from the command line.

- ``list`` prints the subjects, or one subject's versions (number, id, type, live or soft-deleted);
- ``register`` registers a schema read from a file or stdin (``--type``, ``--references``);
- ``check`` tests a schema's compatibility against a subject's latest version, one version, or (``--all``)
  the versions its level names, and prints every reason when it is not compatible (exit status 1);
- ``delete`` soft-deletes a subject or one version, or removes a soft-deleted one (``--permanent``).

Like the other client commands (strata/client_commands.py) they speak HTTP to a running server (--url, or
STRATA_URL) with the same bearer token (--token, or STRATA_TOKEN), here to the registry's Confluent API
under ``/schema-registry`` on the HTTP port: each call is allowed or refused by the same permissions as any
registry client's. A refusal prints the registry's ``error_code`` and message (``error 40401: Subject 'x'
not found.``; an incompatible registration is ``error 409: ...``) and exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson

from strata.client_commands import ClientError, _add_client_options, _check, _client, _http_errors

if TYPE_CHECKING:
    import httpx

# Where the HTTP port serves the registry (api/registry/app.py's PREFIX: the CLI does not import the server).
PREFIX = "/schema-registry"
TYPES = ("AVRO", "JSON", "PROTOBUF")


def _path(subject: str, *rest: str) -> str:
    # A subject may hold "/" and any other character: one path segment, fully escaped.
    return "/".join([PREFIX, "subjects", quote(subject, safe=""), *rest])


def _read_schema(source: str | None) -> str:
    if source is None or source == "-":
        return sys.stdin.read()
    with open(source, encoding="utf-8") as fh:
        return fh.read()


def _references(text: str | None) -> list[dict[str, Any]]:
    """``--references``: a JSON array of {name, subject, version}, or ``@file`` holding one."""
    if not text:
        return []
    if text.startswith("@"):
        with open(text[1:], encoding="utf-8") as fh:
            text = fh.read()
    try:
        refs = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClientError(f"--references is not JSON: {exc}") from None
    if not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs):
        raise ClientError('--references takes a JSON array of {"name", "subject", "version"} objects')
    return refs


def _schema_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"schema": _read_schema(args.file), "schemaType": args.type}
    refs = _references(args.references)
    if refs:
        body["references"] = refs
    return body


def _registry_client(args: argparse.Namespace) -> httpx.Client:
    client = _client(args)
    # Ask for what newer registries add to a version (its "deleted" flag).
    client.headers["Confluent-Accept-Unknown-Properties"] = "true"
    return client


# --- the commands ---------------------------------------------------------------------------------------
@_http_errors
def cmd_list(args: argparse.Namespace) -> int:
    with _registry_client(args) as client:
        if args.subject is None:
            params = {"subjectPrefix": args.prefix, "deleted": str(args.deleted).lower()}
            names = _check(client.get(f"{PREFIX}/subjects", params=params))
            rows: list[Any] = names
        else:
            numbers = _check(
                client.get(_path(args.subject, "versions"), params={"deleted": str(args.deleted).lower()})
            )
            rows = [
                _check(client.get(_path(args.subject, "versions", str(n)), params={"deleted": "true"}))
                for n in numbers
            ]
    if args.json:
        print(orjson.dumps(rows).decode())
        return 0
    for row in rows:
        if isinstance(row, str):
            print(row)
        else:
            state = "soft-deleted" if row.get("deleted") else "live"
            print(f"{row['version']}\t{row['id']}\t{row.get('schemaType', 'AVRO')}\t{state}")
    return 0


@_http_errors
def cmd_register(args: argparse.Namespace) -> int:
    body = _schema_body(args)
    with _registry_client(args) as client:
        params = {"normalize": "true"} if args.normalize else {}
        answer = _check(client.post(_path(args.subject, "versions"), json=body, params=params))
    print(f"registered {args.subject} version {answer['version']} (schema id {answer['id']})")
    return 0


@_http_errors
def cmd_check(args: argparse.Namespace) -> int:
    body = _schema_body(args)
    against = "the versions its compatibility level names" if args.all else f"version {args.version}"
    tail = ("versions",) if args.all else ("versions", quote(args.version, safe=""))
    url = "/".join([PREFIX, "compatibility", "subjects", quote(args.subject, safe=""), *tail])
    with _registry_client(args) as client:
        answer = _check(client.post(url, json=body, params={"verbose": "true"}))
    if answer["is_compatible"]:
        print(f"compatible with {args.subject} ({against})")
        return 0
    print(f"incompatible with {args.subject} ({against}):")
    for message in answer.get("messages") or []:
        print(f"  - {message}")
    return 1


@_http_errors
def cmd_delete(args: argparse.Namespace) -> int:
    params = {"permanent": "true"} if args.permanent else {}
    how = "permanently deleted" if args.permanent else "soft-deleted"
    with _registry_client(args) as client:
        if args.version is None:
            gone = _check(client.delete(_path(args.subject), params=params))
            print(f"{how} {args.subject}: version(s) {', '.join(str(v) for v in gone)}")
        else:
            number = _check(client.delete(_path(args.subject, "versions", args.version), params=params))
            print(f"{how} {args.subject} version {number}")
    return 0


# --- argument parsing -----------------------------------------------------------------------------------
def _add_schema_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", default=None, help="the schema's file (- or none: stdin)")
    parser.add_argument(
        "-t", "--type", choices=TYPES, default="AVRO", type=str.upper, help="schema type (default AVRO)"
    )
    parser.add_argument(
        "-r",
        "--references",
        default=None,
        metavar="JSON|@FILE",
        help='references, a JSON array of {"name", "subject", "version"} (or @file holding one)',
    )


def add_schema_commands(sub: Any) -> None:
    """``strata schemas list|register|check|delete``."""
    schemas = sub.add_parser(
        "schemas",
        help="list, register, check and delete schemas in the schema registry",
        description="The schema registry of a running server (its Confluent API under /schema-registry).",
    )
    ssub = schemas.add_subparsers(dest="schemas_command", required=True, metavar="ACTION")
    lst = ssub.add_parser("list", help="list the subjects, or the versions of one")
    lst.add_argument("subject", nargs="?", default=None, help="list this subject's versions")
    lst.add_argument("--prefix", default="", help="only subjects starting with this")
    lst.add_argument("--deleted", action="store_true", help="include soft-deleted subjects or versions")
    lst.add_argument("--json", action="store_true", help="print the registry's JSON")
    lst.set_defaults(func=cmd_list)

    register = ssub.add_parser("register", help="register a schema under a subject")
    register.add_argument("subject")
    _add_schema_source(register)
    register.add_argument("--normalize", action="store_true", help="store the schema's canonical form")
    register.set_defaults(func=cmd_register)

    check = ssub.add_parser(
        "check",
        help="test a schema's compatibility (exit status 1 if incompatible)",
        description="Test whether a schema could be registered under a subject: against its latest "
        "version, one version (--version), or the versions its compatibility level names (--all). "
        "Prints every reason when it is incompatible, and exits with status 1.",
    )
    check.add_argument("subject")
    _add_schema_source(check)
    where = check.add_mutually_exclusive_group()
    where.add_argument("--version", default="latest", help="a version number, or latest (default)")
    where.add_argument("--all", action="store_true", help="the versions the subject's level names")
    check.set_defaults(func=cmd_check)

    delete = ssub.add_parser(
        "delete",
        help="delete a subject or one version (soft, or --permanent once soft-deleted)",
    )
    delete.add_argument("subject")
    delete.add_argument("version", nargs="?", default=None, help="one version (a number, or latest)")
    delete.add_argument(
        "--permanent", action="store_true", help="remove what a soft delete left (it must come first)"
    )
    delete.set_defaults(func=cmd_delete)
    for p in (lst, register, check, delete):
        _add_client_options(p)
