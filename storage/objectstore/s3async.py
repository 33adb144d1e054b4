"""S3 via aiobotocore, for the agent (async callers): the flush path's PUTs and the fetch path's ranged GETs.

The same request accounting, client settings and error translation as ``s3.py`` (one attempt per call,
counted before it is sent), plus the aiohttp failures that can surface while a response body is read.

One known gap in the accounting: when the server closes a connection without sending any response, aiohttp
itself resends the (idempotent) request once before reporting the failure (RFC 9112 section 9.3.1), and
it offers no public switch to turn that off. Such a call is counted as one request but may have been sent
twice; the test suite pins this behaviour so that a change in aiohttp is noticed.

The client is created lazily on first use, once, inside an ``AsyncExitStack`` that ``close()`` unwinds. Its
HTTP connection pool belongs to the event loop that created it, so one store serves one event loop.
"""

from __future__ import annotations

import asyncio
import io
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

import aiohttp
import aiohttp.payload
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from aiohttp.abc import AbstractStreamWriter
from botocore.exceptions import BotoCoreError, ClientError

from storage.objectstore import s3data
from storage.objectstore.base import (
    GET,
    PUT,
    AsyncObjectStore,
    Body,
    RequestCounters,
    body_bytes,
    empty_range,
)
from storage.objectstore.s3 import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_MAX_POOL_CONNECTIONS,
    DEFAULT_READ_TIMEOUT_S,
    TRANSIENT_SDK_ERRORS,
    S3ClientSettings,
    S3StoreBase,
    crc32c_header,
    is_invalid_range,
    range_header,
    translate_errors,
)

if TYPE_CHECKING:
    from types_aiobotocore_s3.client import S3Client

# aiobotocore maps most aiohttp failures to botocore exceptions, but a truncated or malformed body
# (ClientPayloadError) and a timeout while reading can still arrive as aiohttp/asyncio exceptions.
ASYNC_TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    *TRANSIENT_SDK_ERRORS,
    aiohttp.ClientError,
    TimeoutError,
)


class AsyncS3ObjectStore(S3StoreBase, AsyncObjectStore):
    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        counters: RequestCounters | None = None,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
        max_pool_connections: int = DEFAULT_MAX_POOL_CONNECTIONS,
    ) -> None:
        super().__init__(
            bucket,
            prefix,
            counters,
            S3ClientSettings(endpoint_url, region, connect_timeout_s, read_timeout_s, max_pool_connections),
        )
        self._config = AioConfig(**self.settings.config_options())
        self._exit_stack = AsyncExitStack()
        self._client: S3Client | None = None
        self._closed = False
        # Serialises the first-use creation so concurrent first calls share one client.
        self._client_lock = asyncio.Lock()

    async def _get_client(self) -> S3Client:
        if self._client is not None:
            return self._client
        async with self._client_lock:
            if self._closed:
                raise RuntimeError(f"{self.url}: the store is closed")
            if self._client is None:
                session = get_session()
                session.register_component("data_loader", s3data.data_loader())
                try:
                    self._client = await self._exit_stack.enter_async_context(
                        session.create_client("s3", config=self._config, **self.settings.client_options())
                    )
                except (BotoCoreError, ValueError) as exc:
                    raise self._client_failed(exc) from exc
            return self._client

    async def open(self) -> None:
        """Create the client now: botocore loads and parses its service model for it, a fraction of a
        second of CPU on an idle machine and seconds on a busy one, which the first flush's producers would
        wait out."""
        await self._get_client()

    async def put(self, key: str, data: Body) -> None:
        client = await self._get_client()
        data = body_bytes(data)  # one request body; aiobotocore signs and sends a single buffer
        self.counters.incr(PUT, written=len(data))
        with translate_errors(self._where("PUT", key), ASYNC_TRANSIENT_ERRORS):
            await client.put_object(
                Bucket=self.bucket,
                Key=self.prefix + key,
                Body=_SharedBytesIO(data),
                # S3 checks the body against this; botocore computes no checksum of its own (s3.py's
                # docstring). Its CRC32, in Python-driven 1 MiB reads on the event loop, was a visible share
                # of the agent's CPU under produce load on S3; the crc32c package's C code (hardware CRC-32C)
                # takes a fraction of that (py-spy, docs/benchmarks.md).
                ChecksumCRC32C=crc32c_header(data),
            )

    async def get(self, key: str) -> bytes:
        return await self._get_all(key, None)

    async def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end), clipped to the object's size, as in ``S3ObjectStore.get_range``."""
        if empty_range(start, end):
            return b""
        return await self._get_all(key, range_header(start, end))

    async def _get_all(self, key: str, header: str | None) -> bytes:
        """One GET of the whole object (``header`` None) or of a range, its body read to the end."""
        client = await self._get_client()
        self.counters.incr(GET)
        with translate_errors(self._where("GET", key), ASYNC_TRANSIENT_ERRORS):
            try:
                if header is None:
                    response = await client.get_object(Bucket=self.bucket, Key=self.prefix + key)
                else:
                    response = await client.get_object(
                        Bucket=self.bucket, Key=self.prefix + key, Range=header
                    )
            except ClientError as exc:
                if header is not None and is_invalid_range(exc):
                    return b""
                raise
            async with response["Body"] as body:
                data = await body.read()
        self.counters.add_bytes(read=len(data))
        return data

    async def close(self) -> None:
        async with self._client_lock:
            self._closed = True
            self._client = None
            await self._exit_stack.aclose()


__all__ = ["AsyncS3ObjectStore"]


class _SharedBytesIO(io.BytesIO):
    """A file-like request body over ``data`` that never copies all of it.

    botocore turns a bytes body into a BytesIO, and aiohttp sizes a BytesIO body with ``getbuffer()``,
    which makes BytesIO copy the bytes it shares: a second copy of every PUT for as long as it uploads
    (measured: with flushes in flight, the agent's peak RSS under overload on S3). Any read botocore makes
    (it sizes the body by seeking) stays BytesIO's own; aiohttp sends it through ``_OneWritePayload``.
    """

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self._data = data

    def getbuffer(self) -> memoryview:
        return memoryview(self._data)


class _OneWritePayload(aiohttp.payload.BytesIOPayload):
    """Sends a ``_SharedBytesIO`` body with one write to the connection's transport.

    aiohttp's own BytesIOPayload writes 256 KiB and then yields to the event loop (``asyncio.sleep(0)``)
    before the next piece, so an upload advances one piece per turn of the loop: on an agent busy with
    requests, a turn takes milliseconds, and a flush's PUT took several times as long as on an idle loop
    (docs/benchmarks.md). Handed the whole body at once, the transport sends what the socket takes and the
    rest whenever it is writable, with no task turns in between; the body is already in memory, so nothing is
    gained by reading it in pieces.
    """

    async def write_with_length(self, writer: AbstractStreamWriter, content_length: int | None) -> None:
        self._set_or_restore_start_position()
        start = self._value.tell()
        view = self._value.getbuffer()[start:]
        if content_length is not None:
            view = view[:content_length]
        self._value.seek(start + len(view))
        await writer.write(view)


# First, before aiohttp's BytesIOPayload (registered for every BytesIO): aiobotocore hands aiohttp the
# body in a proxy whose type is not the body's, so only isinstance, which the try-first list uses, finds it.
aiohttp.payload.PAYLOAD_REGISTRY.register(
    _OneWritePayload, _SharedBytesIO, order=aiohttp.payload.Order.try_first
)
