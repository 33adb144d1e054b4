"""The record browser: one page of a topic's records, from any start, across one partition or all of them.

The scan, its bounds (``limit`` matches, ``max_scan`` records read) and its gaps are the agent core's
(agents/browse.py); this route parses the request and renders the page. Where a page stops, the ``cursor``
(``partition:offset`` pairs) says where the next one starts; the console's live tail is the same request
repeated with the cursor.

Keys and values framed with a schema id (Confluent's wire format: magic byte 0, a 4-byte id) also come
decoded, as JSON with their schema's subject and version (``api/typed_records.py``, which the HTTP fetch's
``decode=schema`` uses too), unless ``decode=false``; a framed field that does not decode says why. The
registry is asked only when a record on the page is framed, and decodes only for a reader who may read a
subject holding the schema (the registry's own rule for ``GET /schemas/ids/{id}``).
"""

from __future__ import annotations

import asyncio
import base64
import math
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Query, Request

from agents.browse import Needles, Start, parse_cursor, scan_page, start_positions
from agents.permissions import SUBJECT, TOPIC, registry_route, route
from api import authz
from api import console_models as out
from api.context import HttpContext
from api.routes.common import ERRORS, CtxDep, TopicPath, topic_name
from api.typed_records import SchemaReader, Typed, Undecoded
from registry.framing import ID_PREFIX, MAGIC_ID
from storage import records
from storage.errors import BadRequest, UnknownPartition

router = APIRouter()

# Browsing "all partitions" keeps a position per partition in the cursor, which travels in the URL
# (uvicorn refuses request lines near 64 KiB, and a character may take 12 bytes percent-encoded): past
# this many partitions, the caller picks one. 256 positions of 11-digit offsets fit in MAX_CURSOR.
MAX_ALL_PARTITIONS = 256
MAX_CURSOR = 4_000
# Reading a schema by id: READ on a subject holding it.
_SCHEMA_READ = registry_route("GET", "/schemas/ids/{schema_id}").need(SUBJECT)
MAX_SAFE_INTEGER = 2**53 - 1  # JavaScript's Number.MAX_SAFE_INTEGER


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
    decode: Annotated[bool, Query(description="decode keys and values that name a registered schema")] = True,
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
    rendered = [_record_out(p, r) for p, r in found]
    if decode:
        await asyncio.to_thread(_decode_typed, http, ctx, name, [r for _, r in found], rendered)
    return out.BrowseOut(
        records=rendered,
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


def _decode_typed(
    http: Request,
    ctx: HttpContext,
    topic: str,
    found: list[records.Record],
    rendered: list[out.BrowseRecordOut],
) -> None:
    """Fill ``key_typed`` and ``value_typed`` of the records whose field is framed with a schema id (in a
    worker thread: the registry reads the store)."""
    reader: SchemaReader | None = None
    for record, answer in zip(found, rendered, strict=True):
        for field, data in (("key", record.key), ("value", record.value)):
            if data is None or len(data) < ID_PREFIX or data[0] != MAGIC_ID or ctx.schema_registry is None:
                continue  # names no schema: shown as bytes, as before
            if reader is None:
                reader = SchemaReader(ctx.schema_registry(), topic, partial(authz.may, http, _SCHEMA_READ))
            typed = _typed_out(int.from_bytes(data[1:ID_PREFIX], "big"), reader.decode(data, field))
            setattr(answer, f"{field}_typed", typed)


def _typed_out(schema_id: int, decoded: Typed | Undecoded) -> out.TypedOut:
    if isinstance(decoded, Undecoded):
        return out.TypedOut(
            schema_id=schema_id, schema_type=None, subject=None, version=None, error=decoded.reason
        )
    info = decoded.schema
    return out.TypedOut(
        schema_id=info.schema_id,
        schema_type=info.schema_type,
        subject=info.subject,
        version=info.version,
        json=_js_safe(decoded.value),
        error=None,
    )


def _js_safe(value: object) -> object:
    """``value`` as the browser can show it exactly: a float JSON cannot write (NaN, an infinity) as the
    string protobuf's JSON mapping uses, and an integer beyond JavaScript's 2**53 - 1 either way as its
    decimal string, as that mapping writes every 64-bit integer (``JSON.parse`` would round it)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SAFE_INTEGER:
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _js_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_js_safe(v) for v in value]
    return value
