"""S3 (and S3-compatible: MinIO, moto) via boto3, for synchronous callers.

Request accounting: botocore's own retries are switched off (one attempt per call), because Strata's retry
wrapper (``retry.py``) owns retrying. Every SDK call is then exactly one HTTP request, and it is counted
before it is sent, so ``counters`` equals the requests the service saw (and billed), failed ones included.

Error translation (the only place S3 failures are classified; ``s3async.py`` reuses it):
- ``ObjectNotFound``: NoSuchKey, or a bodiless 404 (HEAD). A HEAD in a missing bucket is also a bodiless
  404, indistinguishable from a missing key; every other call reports NoSuchBucket explicitly.
- ``TransientStoreError``: any 5xx or 429, the throttling/timeout codes below, and connection, timeout and
  body-streaming failures.
- ``ObjectStoreError``: everything else the service refuses (AccessDenied, NoSuchBucket, ...) and SDK
  failures such as missing credentials.

Ranges are [start, end) as in the interface; on the wire they are ``Range: bytes=start-(end-1)``. Like S3
itself, a range that runs past the end of the object returns the bytes that exist, and one that starts at
or after the end returns b"" (S3 answers 416 InvalidRange, which is not an error for Strata's readers:
they compare lengths against the metadata and raise CorruptObject themselves).

Checksums: every PUT carries the body's CRC-32C (``crc32c_header``, the crc32c package's hardware CRC),
which S3 checks; botocore computes none of its own (``request_checksum_calculation="when_required"``) and
validates none on GETs (``response_checksum_validation="when_required"``): both were Python-driven loops
over the body (a CRC32 per 1 MiB read), and every byte a reader uses is checked against the CRC-32C of its
chunk or footer anyway (``storage/fileformat/``).
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import botocore.session
import urllib3.exceptions
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    FlexibleChecksumError,
    HTTPClientError,
    IncompleteReadError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.handlers import convert_body_to_file_like_object
from botocore.response import StreamingBody
from botocore.utils import is_valid_endpoint_url, is_valid_ipv6_endpoint_url, validate_region_name
from crc32c import crc32c

from storage.errors import ObjectNotFound, ObjectStoreError, SettingsError, StrataError, TransientStoreError
from storage.objectstore import s3data
from storage.objectstore.base import (
    DELETE,
    GET,
    HEAD,
    LIST,
    PUT,
    EmptyStream,
    ObjectInfo,
    ObjectStore,
    ObjectStream,
    RequestCounters,
    StreamBase,
    empty_range,
)

if TYPE_CHECKING:
    from types_boto3_s3.client import S3Client
    from types_boto3_s3.type_defs import GetObjectOutputTypeDef, ListObjectsV2OutputTypeDef

DEFAULT_CONNECT_TIMEOUT_S = 5.0
DEFAULT_READ_TIMEOUT_S = 30.0
DEFAULT_MAX_POOL_CONNECTIONS = 32
# ListObjectsV2's maximum; a smaller page only adds LIST requests (tests use it to exercise paging).
DEFAULT_LIST_PAGE_SIZE = 1000

# Error codes that mean "the same request may succeed later", whatever the HTTP status says (S3 sends
# RequestTimeout as a 400, for example).
TRANSIENT_ERROR_CODES = frozenset(
    {
        "InternalError",
        "ServiceUnavailable",
        "SlowDown",
        "RequestTimeout",
        "RequestTimeoutException",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "PriorRequestNotComplete",
        "OperationAborted",
    }
)
NOT_FOUND_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
INVALID_RANGE_CODE = "InvalidRange"

# SDK exceptions (not service answers) that are worth repeating: the request or its response was lost on
# the way. botocore's ConnectionError covers EndpointConnectionError and ConnectTimeoutError; its
# HTTPClientError covers ConnectionClosedError, ReadTimeoutError and ResponseStreamingError. urllib3's own
# errors can leak from a StreamingBody read in some versions. A checksum mismatch on a response body is a
# corrupted transfer, so a repeat fetches it again.
TRANSIENT_SDK_ERRORS: tuple[type[Exception], ...] = (
    BotoConnectionError,
    HTTPClientError,
    IncompleteReadError,
    FlexibleChecksumError,
    urllib3.exceptions.ProtocolError,
    urllib3.exceptions.ReadTimeoutError,
)


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def translate_client_error(exc: ClientError, where: str) -> StrataError:
    code = error_code(exc)
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    if code in NOT_FOUND_CODES:
        return ObjectNotFound(f"{where}: not found ({code})")
    if code in TRANSIENT_ERROR_CODES or status >= 500 or status == 429:
        return TransientStoreError(f"{where}: {code or status} (transient): {exc}")
    return ObjectStoreError(f"{where}: {code or status}: {exc}")


@contextmanager
def translate_errors(
    where: str, transient: tuple[type[Exception], ...] = TRANSIENT_SDK_ERRORS
) -> Iterator[None]:
    """Turn SDK exceptions raised inside the block into Strata's typed errors (see the module doc)."""
    try:
        yield
    except ClientError as exc:
        raise translate_client_error(exc, where) from exc
    except transient as exc:
        raise TransientStoreError(f"{where}: {type(exc).__name__}: {exc}") from exc
    except BotoCoreError as exc:
        raise ObjectStoreError(f"{where}: {type(exc).__name__}: {exc}") from exc


def normalize_prefix(prefix: str) -> str:
    """The key prefix as stored: no leading "/", and a trailing "/" unless empty."""
    prefix = prefix.strip("/")
    return prefix + "/" if prefix else ""


def store_url(bucket: str, prefix: str) -> str:
    return f"s3://{bucket}/{prefix.rstrip('/')}" if prefix else f"s3://{bucket}"


def range_header(start: int, end: int | None) -> str | None:
    """The HTTP Range for [start, end); None means the whole object. Caller guarantees end > start."""
    if end is None:
        return None if start == 0 else f"bytes={start}-"
    return f"bytes={start}-{end - 1}"


def is_invalid_range(exc: ClientError) -> bool:
    """S3's 416: the range starts at or after the end of the object, which reads as no bytes."""
    return error_code(exc) == INVALID_RANGE_CODE


@dataclass(frozen=True, slots=True)
class S3ClientSettings:
    """How a client reaches the service: one value configures the boto3 and the aiobotocore client alike."""

    endpoint_url: str | None = None
    region: str | None = None
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    max_pool_connections: int = DEFAULT_MAX_POOL_CONNECTIONS

    def config_options(self) -> dict[str, Any]:
        """Keyword arguments for botocore's ``Config`` and aiobotocore's ``AioConfig``."""
        return {
            # Exactly one attempt: the retry wrapper owns retrying, and counters must equal real requests.
            # Not {"max_attempts": 1}: in client config botocore reads max_attempts as *retries*, which
            # would send up to two requests per call.
            "retries": {"total_max_attempts": 1, "mode": "standard"},
            "connect_timeout": self.connect_timeout_s,
            "read_timeout": self.read_timeout_s,
            "max_pool_connections": self.max_pool_connections,
            "s3": {
                # MinIO and moto (the only reasons to name an endpoint) serve buckets under the path, not
                # as virtual hosts.
                **({"addressing_style": "path"} if self.endpoint_url is not None else {}),
                # No SHA-256 of every body in the signature. botocore already leaves it out over HTTPS
                # (S3's default), but signs it over plain HTTP (MinIO, moto): on the agent's event loop
                # that hashed every flush, blocking the loop milliseconds per MiB and so growing the next
                # flush (on moto under load, files several times the 8 MiB trigger). Bodies still carry
                # their CRC-32C (``crc32c_header``), which S3 verifies.
                "payload_signing_enabled": False,
            },
            # The body's CRC-32C goes with every PUT (``crc32c_header``), and readers check each chunk's
            # CRC-32C: botocore's own checksums (see the module docstring) would only add Python loops.
            "request_checksum_calculation": "when_required",
            "response_checksum_validation": "when_required",
        }

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments, besides the config, for ``Session.client`` and ``AioSession.create_client``."""
        return {"endpoint_url": self.endpoint_url, "region_name": self.region}


class S3StoreBase:
    """What both S3 stores hold and how they name things; each adds its client (boto3 or aiobotocore)."""

    def __init__(
        self, bucket: str, prefix: str, counters: RequestCounters | None, settings: S3ClientSettings
    ) -> None:
        self.bucket = bucket
        self.prefix = normalize_prefix(prefix)
        self.url = store_url(bucket, self.prefix)
        self.counters = counters if counters is not None else RequestCounters()
        self.settings = settings
        # Both clients are made on first use; what making one would refuse is checked now, so a bad
        # endpoint or region stops start-up instead of failing every request later.
        try:
            endpoint = settings.endpoint_url
            if endpoint is not None and not (
                is_valid_endpoint_url(endpoint) or is_valid_ipv6_endpoint_url(endpoint)
            ):
                raise ValueError(f"Invalid endpoint: {endpoint}")
            if settings.region is not None:
                validate_region_name(settings.region)
        except (BotoCoreError, ValueError) as exc:
            raise self._client_failed(exc) from exc

    def _where(self, action: str, key: str) -> str:
        return f"S3 {action} {self.url} key {key!r}"

    def _client_failed(self, exc: Exception) -> SettingsError:
        return SettingsError(f"cannot create an S3 client for {self.url}: {exc}")


class S3ObjectStream(StreamBase):
    """One streaming GET. Read errors are translated like request errors (a reset mid-body is transient)."""

    def __init__(self, body: StreamingBody, counters: RequestCounters, where: str) -> None:
        self._body = body
        self._counters = counters
        self._where = where

    def read(self, n: int) -> bytes:
        if n < 0:
            raise ValueError("read size must be >= 0")
        if n == 0:
            return b""
        with translate_errors(self._where):
            data = self._body.read(n)
        self._counters.add_bytes(read=len(data))
        return data

    def close(self) -> None:
        self._body.close()


class S3ObjectStore(S3StoreBase, ObjectStore):
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
        list_page_size: int = DEFAULT_LIST_PAGE_SIZE,
    ) -> None:
        if not 1 <= list_page_size <= DEFAULT_LIST_PAGE_SIZE:
            raise ValueError(f"list_page_size must be in [1, {DEFAULT_LIST_PAGE_SIZE}]")
        settings = S3ClientSettings(
            endpoint_url, region, connect_timeout_s, read_timeout_s, max_pool_connections
        )
        super().__init__(bucket, prefix, counters, settings)
        self._list_page_size = list_page_size
        self._config = Config(**settings.config_options())
        self._settings = settings
        self._made: S3Client | None = None
        self._making = threading.Lock()

    @property
    def _client(self) -> S3Client:
        """The boto3 client, made on first use: a process in the agent role holds this store but only its
        async twin does I/O, and a client with its parsed S3 model costs megabytes. A bad endpoint or region
        was refused when the store was made (``S3StoreBase``)."""
        client = self._made
        if client is None:
            with self._making:
                client = self._made
                if client is None:
                    try:
                        # A session per store: boto3's default session is shared global state. The client
                        # itself is thread-safe, so one per store serves every thread. boto3 itself (and
                        # s3transfer, which it imports) loads here, with the first client: ~3 MiB that a
                        # process whose stores are all async (an agent) never needs.
                        import boto3.session

                        core = botocore.session.Session()
                        core.register_component("data_loader", s3data.data_loader())
                        client = boto3.session.Session(botocore_session=core).client(
                            "s3", config=self._config, **self._settings.client_options()
                        )
                    except (BotoCoreError, ValueError) as exc:
                        raise self._client_failed(exc) from exc
                    # A bytes body stays bytes, which urllib3 sends with one sendall. botocore would wrap
                    # it in a BytesIO, which urllib3 sends 16 KiB at a time, taking the GIL back for each:
                    # a compaction output of 16 MiB was a thousand turns against the agent's event loop in
                    # the `all` role. (Wrapped for its retries, which are off here: retry.py resends.)
                    client.meta.events.unregister(
                        "before-parameter-build.s3.PutObject", convert_body_to_file_like_object
                    )
                    self._made = client
        return client

    def put(self, key: str, data: bytes) -> None:
        self.counters.incr(PUT, written=len(data))
        with translate_errors(self._where("PUT", key)):
            self._client.put_object(
                Bucket=self.bucket, Key=self.prefix + key, Body=data, ChecksumCRC32C=crc32c_header(data)
            )

    def get(self, key: str) -> bytes:
        return self._get_all(key, None)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        if empty_range(start, end):
            return b""
        return self._get_all(key, range_header(start, end))

    def _get_object(self, key: str, header: str | None) -> GetObjectOutputTypeDef:
        if header is None:
            return self._client.get_object(Bucket=self.bucket, Key=self.prefix + key)
        return self._client.get_object(Bucket=self.bucket, Key=self.prefix + key, Range=header)

    def _get_all(self, key: str, header: str | None) -> bytes:
        """One GET of the whole object (``header`` None) or of a range, its body read to the end."""
        where = self._where("GET", key)
        self.counters.incr(GET)
        with translate_errors(where):
            try:
                body = self._get_object(key, header)["Body"]
            except ClientError as exc:
                if header is not None and is_invalid_range(exc):
                    return b""
                raise
            try:
                data = body.read()
            finally:
                body.close()
        self.counters.add_bytes(read=len(data))
        return data

    def open_stream(self, key: str, start: int = 0, end: int | None = None) -> ObjectStream:
        if empty_range(start, end):
            return EmptyStream()
        where = self._where("GET", key)
        header = range_header(start, end)
        self.counters.incr(GET)
        with translate_errors(where):
            try:
                response = self._get_object(key, header)
            except ClientError as exc:
                if is_invalid_range(exc):
                    return EmptyStream()
                raise
        return S3ObjectStream(response["Body"], self.counters, where)

    def head(self, key: str) -> ObjectInfo:
        self.counters.incr(HEAD)
        with translate_errors(self._where("HEAD", key)):
            response = self._client.head_object(Bucket=self.bucket, Key=self.prefix + key)
        return ObjectInfo(
            key=key,
            size=response["ContentLength"],
            last_modified_ms=int(response["LastModified"].timestamp() * 1000),
        )

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """ListObjectsV2, one counted LIST per page; keys come back without the store's prefix."""
        return self._list_pages(prefix)

    def _list_pages(self, prefix: str) -> Iterator[ObjectInfo]:
        where = self._where("LIST", prefix)
        full_prefix = self.prefix + prefix
        token: str | None = None
        while True:
            self.counters.incr(LIST)
            with translate_errors(where):
                page: ListObjectsV2OutputTypeDef
                if token is None:
                    page = self._client.list_objects_v2(
                        Bucket=self.bucket, Prefix=full_prefix, MaxKeys=self._list_page_size
                    )
                else:
                    page = self._client.list_objects_v2(
                        Bucket=self.bucket,
                        Prefix=full_prefix,
                        MaxKeys=self._list_page_size,
                        ContinuationToken=token,
                    )
            for obj in page.get("Contents", []):
                yield ObjectInfo(
                    key=obj["Key"][len(self.prefix) :],
                    size=obj["Size"],
                    last_modified_ms=int(obj["LastModified"].timestamp() * 1000),
                )
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or token is None:
                return

    def delete(self, key: str) -> None:
        self.counters.incr(DELETE)
        with translate_errors(self._where("DELETE", key)):
            self._client.delete_object(Bucket=self.bucket, Key=self.prefix + key)

    def close(self) -> None:
        if self._made is not None:
            self._made.close()


def crc32c_header(data: bytes | bytearray | memoryview) -> str:
    """The body's CRC-32C as S3's ``x-amz-checksum-crc32c`` carries it: base64 of its 4 big-endian bytes."""
    return base64.b64encode(crc32c(data).to_bytes(4, "big")).decode("ascii")


__all__ = [
    "S3ClientSettings",
    "S3ObjectStore",
    "S3ObjectStream",
    "crc32c_header",
    "translate_client_error",
    "translate_errors",
]
