"""Scenarios of bad input: batches that break the format's rules, and frames no broker can serve.

Each bad batch is sent in a well-formed Produce request, so the answer is a partition error code; each bad
frame is sent alone on a fresh connection, and the answer is what came back (or that the broker closed the
connection, which is how Kafka answers a request it cannot parse).
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.protocol.metadata.metadata import MetadataRequest

from tests.differential.base import Answers, batch, create_topic, idempotent, patched, produce, scenario
from tests.differential.wire import CLOSED, Side

# Byte positions in a RecordBatch v2 (storage/records/codec.py documents the layout).
MAGIC_AT, ATTRIBUTES_AT, LAST_DELTA_AT, MAX_TS_AT, COUNT_AT = 16, 21, 23, 35, 57


@scenario(quick=True)
def bad_batches(side: Side, prefix: str) -> Answers:
    """Produce with batches that break RecordBatch v2's rules, each alone in a valid request."""
    t, tc = f"{prefix}-bad", f"{prefix}-badc"
    out: Answers = {"create compacted": create_topic(side, tc, 1, {"cleanup.policy": "compact"})}
    good = batch([b"a", b"b", b"c"])
    flipped = bytearray(good)
    flipped[-2] ^= 0xFF
    cases: dict[str, bytes] = {
        "bad crc": bytes(flipped),
        "magic 3": patched(good, MAGIC_AT, "b", 3, fix_crc=False),
        "count too high": patched(good, COUNT_AT, "i", 4),
        "count zero": patched(good, COUNT_AT, "i", 0),
        "last offset delta wrong": patched(good, LAST_DELTA_AT, "i", 7),
        "max timestamp wrong": patched(good, MAX_TS_AT, "q", 5),
        "codec 7": patched(good, ATTRIBUTES_AT, "h", 7),
        "codec gzip, bytes plain": patched(good, ATTRIBUTES_AT, "h", 1),
        "log append time from producer": patched(good, ATTRIBUTES_AT, "h", 8),
        "transactional without transaction": idempotent(patched(good, ATTRIBUTES_AT, "h", 0x10), 77, 0, 0),
        "control batch": patched(good, ATTRIBUTES_AT, "h", 0x20),
        "sequence without producer id": patched(good, 53, "i", 5),
        "truncated": good[:-3],
        "length past the end": patched(good, 8, "i", len(good) + 50, fix_crc=False),
        "trailing garbage": good + b"\x00\x01\x02",
        "empty": b"",
        "negative timestamp": batch([b"x"], t0=-5),
        "value over max.message.bytes": batch([b"v" * 1_100_000]),
    }
    # Each case to a partition of its own, so that one broker accepting a batch the other refuses does not
    # shift the offsets every later case is answered with.
    create_topic(side, t, len(cases) + 1)
    for partition, (name, data) in enumerate(cases.items()):
        out[name] = produce(side, t, partition, data)
        out[f"{name}: then a good batch"] = produce(side, t, partition, good)
    out["acks 2"] = produce(side, t, len(cases), good, acks=2)
    out["null key on compacted topic"] = produce(side, tc, 0, batch([b"a", b"b"], keys=[b"k", None]))
    return out


def _answer_to_raw(got: bytes | str, with_error_code: bool) -> Any:
    if isinstance(got, str):
        return got
    if with_error_code:  # ApiVersions: correlation id, then its error code (response header v0)
        return {"error_code": struct.unpack_from(">h", got, 4)[0]}
    return "answered"


def _frame(api_key: int, version: int, body: bytes, correlation_id: int = 7) -> bytes:
    client = b"strata-differential"
    return struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client + body


@scenario(quick=True)
def bad_frames(side: Side, prefix: str) -> Answers:
    """Frames a broker cannot serve: unknown APIs and versions, oversize, negative and truncated frames."""
    out: Answers = {}
    api_versions = ApiVersionsRequest[3](client_software_name="x", client_software_version="1")
    api_versions.with_header(correlation_id=7, client_id="strata-differential")
    body = api_versions.encode(header=True)
    out["ApiVersions v99"] = _answer_to_raw(side.raw(patched(body, 2, "h", 99, fix_crc=False)), True)
    out["ApiVersions v3"] = _answer_to_raw(side.raw(body), True)
    meta = MetadataRequest[12](
        topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    meta.with_header(correlation_id=7, client_id="strata-differential")
    meta_body = meta.encode(header=True)
    out["Metadata v99"] = _answer_to_raw(side.raw(patched(meta_body, 2, "h", 99, fix_crc=False)), False)
    out["Metadata truncated"] = _answer_to_raw(side.raw(meta_body[:-3]), False)
    out["unknown API key"] = _answer_to_raw(side.raw(_frame(1000, 0, b"")), False)
    out["Fetch v0"] = _answer_to_raw(side.raw(_frame(1, 0, b"\xff\xff\xff\xff")), False)
    out["header only"] = _answer_to_raw(side.raw(b"\x00\x03"), False)
    out["oversize frame"] = _oversize(side)
    out["negative size"] = _sized(side, struct.pack(">i", -5))
    out["zero size"] = _sized(side, struct.pack(">i", 0))
    return out


def _oversize(side: Side) -> Any:
    """A 200 MiB size prefix with a little of the body: Kafka closes (socket.request.max.bytes)."""
    return _sized(side, struct.pack(">i", 200 << 20) + _frame(3, 12, b"\x00" * 64))


def _sized(side: Side, data: bytes) -> Any:
    conn = socket.create_connection(("127.0.0.1", side.port), timeout=10)
    try:
        conn.sendall(data)
        try:
            got = conn.recv(1 << 16)
        except (ConnectionResetError, TimeoutError):
            return CLOSED
        return CLOSED if not got else "answered"
    finally:
        conn.close()
