"""The record browser: one page of a topic's records, from any start, across one partition or all of them.

The scan, its bounds (``limit`` matches, ``max_scan`` records read) and its gaps are the agent core's
(agents/browse.py); this route parses the request and renders the page. Where a page stops, the ``cursor``
(``partition:offset`` pairs) says where the next one starts; the console's live tail is the same request
repeated with the cursor.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Annotated

from fastapi import APIRouter, Query, Request

from agents.browse import Needles, Start, parse_cursor, scan_page, start_positions
from agents.permissions import TOPIC, route
from api import authz
from api import console_models as out
from api.routes.common import ERRORS, CtxDep, TopicPath, topic_name
from storage import records
from storage.errors import BadRequest, UnknownPartition

router = APIRouter()

# Browsing "all partitions" keeps a position per partition in the cursor, which travels in the URL
# (uvicorn refuses request lines near 64 KiB, and a character may take 12 bytes percent-encoded): past
# this many partitions, the caller picks one. 256 positions of 11-digit offsets fit in MAX_CURSOR.
MAX_ALL_PARTITIONS = 256
MAX_CURSOR = 4_000


@router.get("/v1/topics/{topic}/browse", response_model=out.BrowseOut, responses=ERRORS)
async def browse(
    http: Request,
    ctx: CtxDep,
    topic: TopicPath,
    partition: Annotated[
        int | None, Query(ge=0, le=2**31 - 1, description="one partition; all if absent")
    ] = None,
    start: Annotated[Start, Query(description="where the page starts (ignored with a cursor)")] = "beginning",
    offset: Annotated[int | None, Query(ge=0, le=2**62, description="with start=offset")] = None,
    timestamp: Annotated[int | None, Query(ge=0, le=2**62, description="ms, with start=timestamp")] = None,
    cursor: Annotated[str | None, Query(max_length=MAX_CURSOR, description="from a previous page")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    max_scan: Annotated[int, Query(ge=1, le=100_000, description="records read at most")] = 10_000,
    key_contains: Annotated[str | None, Query(max_length=256)] = None,
    value_contains: Annotated[str | None, Query(max_length=256)] = None,
) -> out.BrowseOut:
    """A page of records (keys, values and header values in base64), the gaps met, and where it stopped.

    With ``start=end`` each partition starts ``limit`` records (all partitions: an equal share of it)
    before its high watermark; with ``start=timestamp``, at its first record at or after the timestamp
    (its high watermark if none). A start outside the log is clamped into it."""
    name = topic_name(topic)
    authz.check(http, route("GET", "/v1/topics/{topic}/browse").need(TOPIC), name)
    states = {s.partition: s for s in await asyncio.to_thread(ctx.metadata.partition_states, name)}
    if partition is not None and partition not in states:
        raise UnknownPartition(
            f"topic {name!r} has {len(states)} partition(s); there is no partition {partition}"
        )
    if partition is None and len(states) > MAX_ALL_PARTITIONS:
        raise BadRequest(
            f"topic {name!r} has {len(states)} partitions: browse one of them "
            f"(all partitions at once is limited to {MAX_ALL_PARTITIONS})"
        )
    chosen = [partition] if partition is not None else sorted(states)
    if cursor is not None:
        positions = parse_cursor(cursor, states)
    else:
        find = ctx.agent.fetcher.offset_for_timestamp
        positions = await start_positions(
            find, name, [states[p] for p in chosen], start, offset, timestamp, limit
        )
    needles = Needles(
        key_contains.encode() if key_contains else None, value_contains.encode() if value_contains else None
    )
    page = await scan_page(ctx.agent.fetch, name, states, positions, limit, max_scan, needles)
    found = sorted(page.records, key=lambda item: (item[1].timestamp, item[0], item[1].offset))
    at = page.positions
    return out.BrowseOut(
        records=[_record_out(p, r) for p, r in found],
        gaps=[out.GapOut(partition=g.partition, first=g.first, last=g.last) for g in page.gaps],
        positions=[
            out.PositionOut(
                partition=p,
                next_offset=at[p],
                log_start_offset=states[p].log_start_offset,
                high_watermark=states[p].high_watermark,
            )
            for p in sorted(at)
        ],
        cursor=",".join(f"{p}:{at[p]}" for p in sorted(at)),
        scanned=page.scanned,
        exhausted=all(at[p] >= states[p].high_watermark for p in at),
    )


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _record_out(partition: int, record: records.Record) -> out.BrowseRecordOut:
    return out.BrowseRecordOut(
        partition=partition,
        offset=record.offset,
        timestamp=record.timestamp,
        key=_b64(record.key),
        value=_b64(record.value),
        headers=[out.BrowseHeaderOut(name=h.key, value=_b64(h.value)) for h in record.headers],
    )
