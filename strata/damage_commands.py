"""The operator's commands for damaged stored data: ``strata scan``, ``damaged`` and ``quarantine``.

They run in this process against the bucket and metadata store that ``strata serve`` would use (the same
flags and STRATA_* variables as ``strata compact``), and are safe while servers run:
- ``scan`` reads every live chunk (of one topic, or all) and checks it as a reader would
  (``planner/scrub.py``); what fails goes to the damage log and is listed. Exit status 1 if any damage.
- ``damaged`` lists the damage log: ranges found by readers (compaction, scans), quarantined or not.
- ``quarantine`` turns the damaged chunk holding an offset into a hole: reads move past its offsets, its
  file is collected once nothing else in it is live, and the log keeps who did it, when, and why.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from collections.abc import Callable
from typing import Any

from storage.errors import StrataError
from storage.metadata.rows import DamageRow
from strata.settings import SETTINGS, Settings, load_settings

# The server settings these commands take: where the data is.
_STORE_SETTINGS = frozenset({"data_dir", "bucket", "s3_endpoint", "s3_region", "metadata"})


def _open(args: argparse.Namespace) -> tuple[Settings, Any, Any]:
    from storage.clock import SystemClock
    from storage.metadata import open_metadata_store
    from storage.objectstore import open_object_store

    settings = load_settings({s.name: getattr(args, s.name, None) for s in SETTINGS})
    store = open_object_store(
        settings.bucket_url, endpoint_url=settings.s3_endpoint, region=settings.s3_region, clock=SystemClock()
    )
    return settings, store, open_metadata_store(settings.metadata_url)


def _row_doc(row: DamageRow) -> dict[str, object]:
    return {
        "topic": row.topic,
        "partition": row.partition,
        "first_offset": row.first_offset,
        "last_offset": row.last_offset,
        "object_key": row.object_key,
        "detail": row.detail,
        "found_by": row.found_by,
        "found_ms": row.found_ms,
        "quarantined_ms": row.quarantined_ms,
        "quarantined_by": row.quarantined_by,
        "reason": row.reason,
    }


def cmd_scan(args: argparse.Namespace) -> int:
    from planner.scrub import scrub
    from storage.clock import SystemClock

    _, store, metadata = _open(args)
    try:
        result = scrub(store, metadata, args.topic)
        now = SystemClock().now_ms()
        for finding in result.findings:
            metadata.record_damage([finding.damaged], finding.detail, "strata scan", now)
            d = finding.damaged
            where = f"{d.topic}/{d.partition} offsets {d.first_offset}..{d.last_offset} ({d.object_key})"
            print(f"{where}: {finding.detail}")
        print(
            f"checked {result.chunks} chunk(s), {result.bytes} bytes: {len(result.findings)} damaged",
            file=sys.stderr,
        )
        return 1 if result.findings else 0
    finally:
        store.close()
        metadata.close()


def cmd_damaged(args: argparse.Namespace) -> int:
    _, store, metadata = _open(args)
    try:
        rows = metadata.damaged_ranges(args.topic, None if args.all else False)
        print(json.dumps([_row_doc(r) for r in rows], indent=2))
        return 0
    finally:
        store.close()
        metadata.close()


def cmd_quarantine(args: argparse.Namespace) -> int:
    from storage.clock import SystemClock

    _, store, metadata = _open(args)
    try:
        row = metadata.quarantine(
            args.topic, args.partition, args.offset, args.by, args.reason, SystemClock().now_ms()
        )
    except StrataError as exc:
        print(f"error {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    finally:
        store.close()
        metadata.close()
    print(json.dumps(_row_doc(row), indent=2))
    return 0


def _with_store_flags(parser: argparse.ArgumentParser, func: Callable[[argparse.Namespace], int]) -> None:
    for setting in SETTINGS:
        if setting.name in _STORE_SETTINGS:
            parser.add_argument(
                setting.flag,
                dest=setting.name,
                default=None,
                type=str,
                help=f"{setting.help} [env {setting.env}]",
            )
    parser.set_defaults(func=func)


def add_damage_commands(sub: Any) -> None:
    scan = sub.add_parser(
        "scan",
        help="check every stored chunk; record and list damaged ranges",
        description="Read every live chunk (of --topic, or all) and check its CRC and every record, as a "
        "reader would. Damaged ranges are recorded in the damage log (see `strata damaged`) and printed; "
        "the exit status is 1 if any is found.",
    )
    scan.add_argument("--topic", default=None, help="only this topic's chunks")
    _with_store_flags(scan, cmd_scan)
    damaged = sub.add_parser(
        "damaged",
        help="list the damage log",
        description="The damaged ranges readers and scans recorded, as JSON; quarantined ones with --all.",
    )
    damaged.add_argument("--topic", default=None, help="only this topic's ranges")
    damaged.add_argument("--all", action="store_true", help="quarantined ranges too")
    _with_store_flags(damaged, cmd_damaged)
    quarantine = sub.add_parser(
        "quarantine",
        help="turn a damaged range into a recorded hole",
        description="Drop the stored chunk holding --offset of --topic/--partition: its offsets read as a "
        "hole from now on (consumers move past them), and the damage log records who did it, when and why. "
        "Offsets are never given back.",
    )
    quarantine.add_argument("--topic", required=True)
    quarantine.add_argument("--partition", required=True, type=int)
    quarantine.add_argument("--offset", required=True, type=int, help="any offset inside the damaged range")
    quarantine.add_argument("--reason", required=True, help="why, for the audit record")
    quarantine.add_argument("--by", default=f"User:{getpass.getuser()}", help="who (default: User:<login>)")
    _with_store_flags(quarantine, cmd_quarantine)
