"""Object storage behind one small interface, with the backend chosen by URL.

- ``file:///abs/path`` (or ``file://relative/path``, relative to the working directory): a local
  directory, the embedded default.
- ``s3://bucket`` or ``s3://bucket/prefix``: S3 or an S3-compatible service (``endpoint_url`` for MinIO or
  moto, which also switches to path-style addressing). Credentials come from the standard AWS chain.

Unless ``retry=None``, the backend is wrapped in a retrying store (``retry.py``). Passing the same
``counters`` to ``open_object_store`` and ``open_async_object_store`` makes both count into one place.

The S3 modules are imported only when an s3:// URL is opened, so local-only tools do not load boto3,
aiobotocore and aiohttp. The sync and async openers differ in the backend classes they pick, and the async
S3 store runs its requests on an event loop in a thread of its own (``loopthread.py``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from storage.clock import Clock, SystemClock
from storage.errors import SettingsError
from storage.objectstore.base import (
    DELETE,
    GET,
    HEAD,
    LIST,
    PUT,
    REQUEST_KINDS,
    AsyncObjectStore,
    ObjectInfo,
    ObjectStore,
    ObjectStream,
    RequestCounters,
    StoreT,
)
from storage.objectstore.local import LocalAsyncObjectStore, LocalObjectStore
from storage.objectstore.retry import RetryingAsyncObjectStore, RetryingObjectStore, RetryPolicy

DEFAULT_RETRY_POLICY = RetryPolicy()

# S3's bucket naming rules (also MinIO's): 3-63 characters, lowercase letters, digits, '.' and '-',
# starting and ending with a letter or digit.
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """A parsed object-store URL."""

    scheme: str  # "file" or "s3"
    path: Path | None = None  # file://
    bucket: str = ""  # s3://
    prefix: str = ""  # s3://, without leading or trailing "/"


def parse_store_url(url: str) -> StoreLocation:
    """Parse and validate an object-store URL; anything malformed or unknown is a SettingsError."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise SettingsError(f"malformed object store URL {url!r}: {exc}") from exc
    if parts.query or parts.fragment:
        raise SettingsError(f"object store URL {url!r} must not have a query or fragment")
    if parts.scheme == "file":
        # file:///abs/path has an empty netloc; file://relative/path puts the first segment there.
        raw = unquote(parts.netloc + parts.path)
        if not raw or "\x00" in raw:
            raise SettingsError(f"object store URL {url!r} has no directory")
        return StoreLocation(scheme="file", path=Path(raw))
    if parts.scheme == "s3":
        bucket = parts.netloc
        if "@" in bucket or ":" in bucket:
            raise SettingsError(
                f"object store URL {url!r}: credentials and ports do not belong in s3:// URLs"
            )
        if not _BUCKET_RE.fullmatch(bucket) or ".." in bucket:
            raise SettingsError(f"object store URL {url!r}: {bucket!r} is not a valid bucket name")
        prefix = unquote(parts.path).strip("/")
        if "//" in prefix or "\x00" in prefix:
            raise SettingsError(f"object store URL {url!r}: malformed key prefix {prefix!r}")
        return StoreLocation(scheme="s3", bucket=bucket, prefix=prefix)
    raise SettingsError(f"object store URL {url!r}: unknown scheme {parts.scheme!r} (use file:// or s3://)")


def open_object_store(
    url: str,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    counters: RequestCounters | None = None,
    retry: RetryPolicy | None = DEFAULT_RETRY_POLICY,
    clock: Clock | None = None,
    rng: random.Random | None = None,
) -> ObjectStore:
    """The synchronous store for ``url`` (see ``_with_retry`` for ``retry``, ``clock`` and ``rng``)."""
    location = parse_store_url(url)
    if location.path is not None:
        store: ObjectStore = LocalObjectStore(location.path, counters=counters)
    else:
        from storage.objectstore.s3 import S3ObjectStore

        store = S3ObjectStore(
            location.bucket, location.prefix, endpoint_url=endpoint_url, region=region, counters=counters
        )
    return _with_retry(store, RetryingObjectStore, retry, clock, rng)


def open_async_object_store(
    url: str,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    counters: RequestCounters | None = None,
    retry: RetryPolicy | None = DEFAULT_RETRY_POLICY,
    clock: Clock | None = None,
    rng: random.Random | None = None,
) -> AsyncObjectStore:
    """The async store for ``url``. S3's client is created on first use (or ``open``), on the event loop of
    the store's own thread."""
    location = parse_store_url(url)
    if location.path is not None:
        store: AsyncObjectStore = LocalAsyncObjectStore(location.path, counters=counters)
    else:
        from storage.objectstore.loopthread import LoopThreadAsyncObjectStore
        from storage.objectstore.s3async import AsyncS3ObjectStore

        # S3's requests run on a loop of their own, so that they do not wait behind the caller's (the
        # agent's) other work turn by turn (loopthread.py). Retries stay outside, on the caller's loop.
        store = LoopThreadAsyncObjectStore(
            AsyncS3ObjectStore(
                location.bucket, location.prefix, endpoint_url=endpoint_url, region=region, counters=counters
            )
        )
    return _with_retry(store, RetryingAsyncObjectStore, retry, clock, rng)


def _with_retry(
    store: StoreT,
    retrying: Callable[[StoreT, RetryPolicy, Clock, random.Random], StoreT],
    retry: RetryPolicy | None,
    clock: Clock | None,
    rng: random.Random | None,
) -> StoreT:
    """``store`` wrapped in ``retrying`` (its sync or async retry wrapper), or as it is if ``retry`` is None.

    ``clock``/``rng`` default to the system clock and a fresh OS-seeded Random (this is the composition
    root; tests pass ManualClock and a seeded Random).
    """
    if retry is None:
        return store
    return retrying(
        store,
        retry,
        clock if clock is not None else SystemClock(),
        rng if rng is not None else random.Random(),
    )


__all__ = [
    "DEFAULT_RETRY_POLICY",
    "DELETE",
    "GET",
    "HEAD",
    "LIST",
    "PUT",
    "REQUEST_KINDS",
    "AsyncObjectStore",
    "ObjectInfo",
    "ObjectStore",
    "ObjectStream",
    "RequestCounters",
    "RetryPolicy",
    "StoreLocation",
    "open_async_object_store",
    "open_object_store",
    "parse_store_url",
]
