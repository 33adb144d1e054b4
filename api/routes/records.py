"""Produce and fetch records, and a partition's offsets.

Produce: the middleware reserved memory for the body before it was read (api/middleware.py); the handler
parses and encodes it and hands the agent the encoded request with that ``Reservation``, which the agent's
buffer consumes. The handler never releases memory itself: the reservation does, once.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Annotated

import orjson
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import Response
from starlette.background import BackgroundTask

from agents.buffer import Reservation
from agents.chunks import ChunksResult, decode_fetch
from agents.delete_records import delete_records as delete_records_below
from agents.permissions import SUBJECT, TOPIC, registry_route, route
from agents.principals import ANYONE
from api import authz, models
from api._recordjson import render_offsets
from api.context import HttpContext
from api.middleware import RESERVATION, Admission
from api.produce_body import TextRecords, TypedRecords, parse_produce_request
from api.record_json import render_records
from api.routes.common import ERRORS, CtxDep, MiB, PartitionPath, TopicPath, topic_name
from api.schema_checks import check_schemas
from api.typed_produce import encode_typed
from api.typed_records import SchemaReader, typed_record_out
from storage.errors import BadRequest, BufferFull, RecordTooLarge, StrataError

_IDEMPOTENCY_KEY_RE = re.compile(r"[\x21-\x7e]{1,200}")

router = APIRouter()
_P = "/v1/topics/{topic}/partitions/{partition}"
_PRODUCE = route("POST", "/v1/topics/{topic}/records").need(TOPIC)
_FETCH = route("GET", _P + "/records").need(TOPIC)
_OFFSETS = route("GET", _P + "/offsets").need(TOPIC)
_DELETE = route("DELETE", _P + "/records").need(TOPIC)
# decode=schema decodes a value through a subject the principal may read: the registry's own rule.
_SCHEMA_READ = registry_route("GET", "/schemas/ids/{schema_id}").need(SUBJECT)

# A fetch whose wait is shorter still waits this long for fetch memory before it is told to retry.
MIN_BUDGET_WAIT_S = 1.0


def _reservation(request: Request, ctx: HttpContext) -> Reservation:
    """The memory the middleware reserved for this body (an empty one if admission did not apply)."""
    held: Reservation | None = request.scope.get(RESERVATION)
    return held if held is not None else ctx.agent.buffer.reserve(0)


def _scoped(http: Request, key: str) -> str:
    """The key as stored: with authentication, prefixed by the principal and a space (which no key holds),
    so two principals sending the same key never see each other's answer."""
    if not _IDEMPOTENCY_KEY_RE.fullmatch(key):
        raise BadRequest("Idempotency-Key must be 1-200 printable ASCII characters")
    who = authz.principal(http)
    return key if who is None or who is ANYONE else f"{who.acl_principal} {key}"


async def _body(http: Request) -> bytes:
    """The request body, read without Starlette keeping a copy on the request (``Request.body`` caches it
    for the request's lifetime, which for a produce request includes its wait for the flush)."""
    chunks = [chunk async for chunk in http.stream()]
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


@router.post(
    "/v1/topics/{topic}/records",
    response_model=models.ProduceOut,
    responses=ERRORS,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "anyOf": [
                            {"$ref": "#/components/schemas/ProduceIn"},
                            {"$ref": "#/components/schemas/TypedProduceIn"},
                        ]
                    }
                }
            },
        }
    },
)
async def produce(
    http: Request,
    topic: TopicPath,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> Response:
    # The hot path takes the ctx and the reservation from the request itself rather than through
    # FastAPI dependencies: dependency resolution was a measurable share of the CPU per produce request.
    # The body (documented as ProduceIn or TypedProduceIn, see openapi_extra above) is read and parsed
    # here, in one pass of compiled code (api/produce_body.py).
    ctx: HttpContext = http.app.state.ctx
    held = _reservation(http, ctx)
    agent = ctx.agent
    try:
        body = await _body(http)
        name = topic_name(topic)
        authz.check(http, _PRODUCE, name)
        # The topic first: from here until the request is queued nothing awaits, so at most one request
        # is in its parse window at a time (Admission's bound). Parsed while a topic lookup waited, every
        # request arriving meanwhile held its parsed body at once.
        cached = await agent.topic(name)
        # The parse window: until the body is encoded, it and its parsed objects hold up to
        # Admission.expansion times its size. BufferFull (429) here if that does not fit.
        held.grow(len(body) * (Admission.expansion - 1))
        recs = parse_produce_request(body, http.headers.get("content-type"))
        del body
        if len(recs) > ctx.limits.max_records_per_request:
            raise RecordTooLarge(
                f"{len(recs)} records in one request; the limit is {ctx.limits.max_records_per_request}"
            )
        if idempotency_key is not None:
            idempotency_key = _scoped(http, idempotency_key)
        if isinstance(recs, TypedRecords):
            # Typed keys or values (api/typed_produce.py): encoded off the loop, where the schemas are
            # read. The only await in the parse window besides a cold schema check; the window's
            # reservation counts the parsed body meanwhile.
            recs = await encode_typed(ctx, recs)
        if isinstance(recs, TextRecords):
            # Encoded in one C loop; a record it declines sends the request through encode, which says why.
            request = agent.encode_text(cached, recs.items) or agent.encode(cached, recs.records())
        else:
            request = agent.encode(cached, recs)
        # Only the encoded request (counted by the produce buffer) waits for the flush: the records go now.
        del recs
        if cached.config.schema_validation:
            # Awaits only when the schema cache cannot answer (api/schema_checks.py).
            await check_schemas(ctx.schema_validator, name, cached.config, request)
        offsets = await agent.produce(request, held, idempotency_key)
    except StrataError as exc:
        ctx.metrics.produce_requests.labels(str(exc.code)).inc()
        raise
    ctx.metrics.produce_requests.labels("ok").inc()
    # {"offsets":[{"partition":P,"offset":O},...]} written in C from the per-batch answer: no dict per record.
    answer = bytearray(b'{"offsets":')
    render_offsets(answer, offsets.order, offsets.partitions, offsets.bases)
    answer += b"}"
    return Response(memoryview(answer), media_type="application/json")


@router.get(
    "/v1/topics/{topic}/partitions/{partition}/records",
    response_model=models.FetchOut,
    responses={**ERRORS, 416: {"model": models.ErrorOut}},
)
async def fetch(
    http: Request,
    ctx: CtxDep,
    topic: TopicPath,
    partition: PartitionPath,
    offset: Annotated[int, Query(le=models.MAX_OFFSET)] = 0,
    max_bytes: Annotated[int, Query(ge=1, le=64 * MiB)] = MiB,
    max_wait_ms: Annotated[int, Query(ge=0, le=60_000)] = 500,
    encoding: models.Encoding = "utf8",
    isolation: models.Isolation = "read_committed",
    decode: models.Decode = "none",
) -> Response:
    """Records from ``offset`` on. ``isolation``: ``read_committed`` (the default, as librdkafka's and
    kafkajs' consumers) stops at the last stable offset and leaves out aborted transactions' records;
    ``read_uncommitted`` returns every stored record. Transaction markers are never records.
    ``decode=schema``: keys and values framed with a registered schema's id (Confluent's wire format)
    are answered as JSON, with ``key_schema`` / ``value_schema``; others keep ``encoding`` and say why in
    ``key_decode_error`` / ``value_decode_error``."""
    name = topic_name(topic)
    authz.check(http, _FETCH, name)
    started = ctx.clock.monotonic()
    grant = await _fetch_grant(ctx, max_bytes, max_wait_ms)
    committed = isolation == "read_committed"
    try:
        may_read = partial(authz.may, http, _SCHEMA_READ) if decode == "schema" else None
        read = _Read(name, partition, offset, max_bytes, max_wait_ms, committed, may_read)
        response = await _fetch(ctx, read, encoding, started)
    except BaseException:
        ctx.fetch_budget.release(grant)
        raise
    # Held until the answer is sent: a rendered answer is its records' bytes again, and more.
    response.background = BackgroundTask(ctx.fetch_budget.release, grant)
    return response


async def _fetch_grant(ctx: HttpContext, max_bytes: int, max_wait_ms: int) -> int:
    """A grant of the door's fetch budget for an answer of up to ``max_bytes`` of records (twice that:
    rendered as JSON, they take more), waited for as long as the fetch may wait, at least a second; past
    that the agent is busy (BufferFull, 429 with Retry-After)."""
    try:
        async with asyncio.timeout(max(max_wait_ms / 1000, MIN_BUDGET_WAIT_S)):
            return await ctx.fetch_budget.acquire(2 * max_bytes)
    except TimeoutError:
        raise BufferFull("fetch answers hold the agent's fetch memory; retry later") from None


@dataclass(frozen=True, slots=True)
class _Read:
    topic: str
    partition: int
    offset: int
    max_bytes: int
    max_wait_ms: int
    read_committed: bool
    # decode=schema: which subjects the principal may read (a schema is decoded, and named, only through
    # one of them, as the registry answers GET /schemas/ids/{id}); None: no decoding.
    may_read: Callable[[str], bool] | None


async def _fetch(ctx: HttpContext, read: _Read, encoding: models.Encoding, started: float) -> Response:
    try:
        # A negative offset is out of range like any other: the fetcher checks it against the
        # partition's log start and high watermark and raises 41601 with the valid range.
        result = await ctx.agent.fetch_chunks(
            read.topic, read.partition, read.offset, read.max_bytes, read.max_wait_ms, read.read_committed
        )
        body = bytearray(b'{"records":')
        rendered: tuple[int, int] | None
        if read.may_read is not None:
            rendered = await _render_typed(ctx, read.topic, result, encoding, body, read.may_read)
        else:
            rendered = render_records(result, encoding == "base64", body)
        if rendered is None:
            # The reference path: decodes every record and raises the precise error (CorruptObject,
            # NotAcceptable) where the compiled renderer declined.
            fetched = decode_fetch(result)
            body = bytearray(b'{"records":')
            body += orjson.dumps([models.record_out(r, encoding) for r in fetched.records])
            rendered = (len(fetched.records), fetched.next_offset)
    except StrataError as exc:
        ctx.metrics.fetch_requests.labels(str(exc.code)).inc()
        raise
    count, next_offset = rendered
    ctx.metrics.fetch_requests.labels("ok").inc()
    ctx.metrics.fetch_records.inc(count)
    ctx.metrics.fetch_bytes.inc(sum(len(data) for _, data in result.chunks))
    ctx.metrics.fetch_latency.observe(ctx.clock.monotonic() - started)
    body += b","
    body += orjson.dumps(
        {
            "next_offset": next_offset,
            "high_watermark": result.high_watermark,
            "log_start_offset": result.log_start_offset,
            "last_stable_offset": result.stable if result.stable is not None else result.high_watermark,
        }
    )[1:]  # {"records":[...],"next_offset":...}: the object's other fields after the records array
    return Response(memoryview(body), media_type="application/json")


async def _render_typed(
    ctx: HttpContext,
    topic: str,
    result: ChunksResult,
    encoding: models.Encoding,
    body: bytearray,
    may_read: Callable[[str], bool],
) -> tuple[int, int]:
    """The records with their keys and values decoded by their schemas (api/typed_records.py), rendered
    into ``body``: in a worker thread, which reads the schemas from the metadata store."""
    if ctx.schema_registry is None:
        raise BadRequest("decode=schema: this agent serves no schema registry")
    make_registry = ctx.schema_registry

    def render() -> tuple[int, int]:
        fetched = decode_fetch(result)
        reader = SchemaReader(make_registry(), topic, may_read)
        body.extend(orjson.dumps([typed_record_out(reader, r, encoding) for r in fetched.records]))
        return len(fetched.records), fetched.next_offset

    return await asyncio.to_thread(render)


@router.get(
    "/v1/topics/{topic}/partitions/{partition}/offsets",
    response_model=models.OffsetsOut,
    responses=ERRORS,
)
async def offsets(
    http: Request, ctx: CtxDep, topic: TopicPath, partition: PartitionPath
) -> models.OffsetsOut:
    name = topic_name(topic)
    authz.check(http, _OFFSETS, name)
    state = await asyncio.to_thread(ctx.metadata.partition_state, name, partition)
    return models.OffsetsOut(
        log_start_offset=state.log_start_offset,
        high_watermark=state.high_watermark,
        last_stable_offset=state.last_stable_offset,
    )


@router.delete(
    "/v1/topics/{topic}/partitions/{partition}/records",
    response_model=models.OffsetsOut,
    responses={**ERRORS, 416: {"model": models.ErrorOut}},
)
async def delete_records(
    http: Request,
    ctx: CtxDep,
    topic: TopicPath,
    partition: PartitionPath,
    before_offset: Annotated[int, Query(ge=0, le=models.MAX_OFFSET)],
) -> models.OffsetsOut:
    """Delete the partition's records below ``before_offset``: its log start moves up to it (never back),
    as Kafka's DeleteRecords does (the same code answers both doors). Needs DELETE on the topic. 416
    (41601) past the high watermark; 409 (40910) when the topic's cleanup.policy does not include delete.
    Answers the partition's offsets afterwards."""
    name = topic_name(topic)
    authz.check(http, _DELETE, name)
    state = await asyncio.to_thread(
        delete_records_below, ctx.metadata, name, partition, before_offset, ctx.clock.now_ms()
    )
    return models.OffsetsOut(
        log_start_offset=state.log_start_offset,
        high_watermark=state.high_watermark,
        last_stable_offset=state.last_stable_offset,
    )
