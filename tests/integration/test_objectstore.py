"""The object-store contract, run against every backend: a local directory, and S3 through a moto server
(boto3 for the sync store, aiobotocore for the async one).

Request counters are asserted exactly: they are how tests and benchmarks check Strata's cost shape, so they
must equal the requests the backend really served. Faults are injected with ``FaultyObjectStore`` and a
seeded ``random.Random``; retry sleeps go to a ``ManualClock``, so nothing here waits.
"""

from __future__ import annotations

import asyncio
import base64
import math
import random
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import closing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp.payload
import pytest
from botocore.exceptions import ClientError
from crc32c import crc32c

from storage._durable import write_file
from storage.clock import ManualClock
from storage.errors import (
    ObjectNotFound,
    ObjectStoreError,
    SettingsError,
    StrataError,
    TransientStoreError,
    Unavailable,
)
from storage.objectstore import (
    GET,
    LIST,
    PUT,
    REQUEST_KINDS,
    AsyncObjectStore,
    ObjectStore,
    ObjectStream,
    RequestCounters,
    RetryPolicy,
    open_async_object_store,
    open_object_store,
)
from storage.objectstore.base import ON_DURABLE
from storage.objectstore.faults import FaultyAsyncObjectStore, FaultyObjectStore
from storage.objectstore.local import TEMP_PREFIX, LocalAsyncObjectStore, LocalObjectStore
from storage.objectstore.loopthread import LoopThreadAsyncObjectStore
from storage.objectstore.retry import RetryingAsyncObjectStore, RetryingObjectStore
from storage.objectstore.s3 import S3ObjectStore, translate_client_error
from storage.objectstore.s3async import AsyncS3ObjectStore

if TYPE_CHECKING:
    from types_boto3_s3.client import S3Client

pytestmark = pytest.mark.integration

# A small LIST page so that pagination is exercised with a handful of keys.
PAGE = 3


def counts(**kinds: int) -> dict[str, int]:
    """A full counter snapshot: every kind not named is zero."""
    expected = dict.fromkeys(REQUEST_KINDS, 0)
    expected.update(kinds)
    return expected


def payload(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


def read_all(stream: ObjectStream, piece: int) -> bytes:
    out = bytearray()
    with closing(stream):
        while chunk := stream.read(piece):
            assert len(chunk) <= piece
            out += chunk
    return bytes(out)


def closed_port() -> int:
    """A local port nothing listens on (bound, then released): connecting to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


class FailingS3:
    """A local HTTP server that answers every request with one fixed S3 failure, and counts the requests.

    ``status`` 0 means "drop the connection without answering" (a reset). It proves what moto cannot: how
    real 5xx/throttling answers are classified, and that botocore sends exactly one request per call.
    """

    def __init__(self, status: int, code: str) -> None:
        self.requests = 0
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _fail(self) -> None:
                with lock:
                    outer.requests += 1
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                if status == 0:
                    self.close_connection = True
                    return
                body = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_HEAD = do_DELETE = _fail

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # A short poll interval keeps shutdown() (which waits for the next poll) fast.
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()


@pytest.fixture
def failing_s3() -> Iterator[Callable[[int, str], FailingS3]]:
    servers: list[FailingS3] = []

    def start(status: int, code: str) -> FailingS3:
        servers.append(FailingS3(status, code))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(params=["local", "s3", "s3-prefixed"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ObjectStore]:
    backend: ObjectStore
    if request.param == "local":
        backend = LocalObjectStore(tmp_path / "bucket", list_page_size=PAGE)
    else:
        endpoint: str = request.getfixturevalue("moto_server")
        bucket: str = request.getfixturevalue("s3_bucket")
        prefix = "cluster-a/data" if request.param == "s3-prefixed" else ""
        backend = S3ObjectStore(bucket, prefix, endpoint_url=endpoint, list_page_size=PAGE)
    try:
        yield backend
    finally:
        backend.close()


@pytest.fixture(params=["local", "s3"])
async def async_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncObjectStore]:
    backend: AsyncObjectStore
    if request.param == "local":
        backend = LocalAsyncObjectStore(tmp_path / "bucket")
    else:
        endpoint: str = request.getfixturevalue("moto_server")
        bucket: str = request.getfixturevalue("s3_bucket")
        backend = AsyncS3ObjectStore(bucket, endpoint_url=endpoint)
    try:
        yield backend
    finally:
        await backend.close()


# --- the contract ------------------------------------------------------------------------------------------


def test_put_get_overwrite_and_empty(store: ObjectStore) -> None:
    store.put("l0/obj", b"hello")
    assert store.get("l0/obj") == b"hello"
    store.put("l0/obj", b"world, again")
    assert store.get("l0/obj") == b"world, again"
    store.put("l0/empty", b"")
    assert store.get("l0/empty") == b""
    assert store.head("l0/empty").size == 0
    assert store.counters.snapshot() == counts(PUT=3, GET=3, HEAD=1)
    assert store.counters.bytes_written == len(b"hello") + len(b"world, again")


def test_get_range(store: ObjectStore) -> None:
    data = payload(10_000)
    store.put("obj", data)
    assert store.get_range("obj", 0, 10) == data[:10]
    assert store.get_range("obj", 100, 5000) == data[100:5000]
    assert store.get_range("obj", 9990, 10_000) == data[9990:]
    # Like S3, a range running past the end is clipped, and one starting at the end is empty.
    assert store.get_range("obj", 9990, 20_000) == data[9990:]
    assert store.get_range("obj", 10_000, 10_010) == b""
    # An empty range needs no request.
    assert store.get_range("obj", 5, 5) == b""
    with pytest.raises(ValueError, match="range"):
        store.get_range("obj", 5, 4)
    with pytest.raises(ValueError, match="range"):
        store.get_range("obj", -1, 4)
    assert store.counters.snapshot() == counts(PUT=1, GET=5)
    assert store.counters.bytes_read == 10 + 4900 + 10 + 10


@pytest.mark.parametrize(
    ("start", "end"),
    [(0, None), (123, None), (123, 7001), (0, 10_000), (9_999, None), (10_000, None), (50_000, None), (7, 7)],
)
def test_open_stream_in_small_pieces(store: ObjectStore, start: int, end: int | None) -> None:
    data = payload(10_000)
    store.put("obj", data)
    assert read_all(store.open_stream("obj", start, end), piece=7) == data[start:end]
    # One stream is one GET, however many reads consume it (an empty range sends nothing).
    assert store.counters.snapshot() == counts(PUT=1, GET=0 if end == start else 1)
    assert store.counters.bytes_read == len(data[start:end])


def test_stream_closed_early_reads_nothing_more(store: ObjectStore) -> None:
    data = payload(100_000)
    store.put("obj", data)
    stream = store.open_stream("obj", 10)
    assert stream.read(5) == data[10:15]
    stream.close()
    assert store.counters.get(GET) == 1


def test_head(store: ObjectStore) -> None:
    store.put("l1/obj", payload(1234))
    info = store.head("l1/obj")
    assert (info.key, info.size) == ("l1/obj", 1234)
    assert info.last_modified_ms > 1_600_000_000_000
    assert store.counters.snapshot() == counts(PUT=1, HEAD=1)


def test_missing_key_is_object_not_found(store: ObjectStore) -> None:
    with pytest.raises(ObjectNotFound):
        store.get("nope")
    with pytest.raises(ObjectNotFound):
        store.get_range("nope", 0, 10)
    with pytest.raises(ObjectNotFound):
        store.open_stream("dir/nope")
    with pytest.raises(ObjectNotFound):
        store.head("nope")
    store.delete("nope")  # S3 semantics: deleting a missing key succeeds
    assert store.counters.snapshot() == counts(GET=3, HEAD=1, DELETE=1)


def test_delete(store: ObjectStore) -> None:
    store.put("l0/a", b"a")
    store.put("l0/b", b"b")
    store.delete("l0/a")
    with pytest.raises(ObjectNotFound):
        store.get("l0/a")
    assert [i.key for i in store.list()] == ["l0/b"]
    store.delete("l0/a")
    assert store.counters.snapshot() == counts(PUT=2, GET=1, LIST=1, DELETE=2)


# Keys chosen so that directory-wise and key-wise order differ: "-" (0x2d) and "." sort before "/" (0x2f).
LIST_KEYS = ["a-c", "a.b", "a/b", "a/c/d", "a/c-e", "a0", "b", "l0/01", "l0/02", "l0/10"]


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("", sorted(LIST_KEYS)),
        ("a/", ["a/b", "a/c-e", "a/c/d"]),
        ("a/c", ["a/c-e", "a/c/d"]),
        ("a", ["a-c", "a.b", "a/b", "a/c-e", "a/c/d", "a0"]),
        ("l0/0", ["l0/01", "l0/02"]),
        ("l0/", ["l0/01", "l0/02", "l0/10"]),
        ("nope/", []),
        ("q", []),
    ],
)
def test_list_order_prefixes_and_pages(store: ObjectStore, prefix: str, expected: list[str]) -> None:
    shuffled = list(LIST_KEYS)
    random.Random(5).shuffle(shuffled)
    for i, key in enumerate(shuffled):
        store.put(key, b"x" * i)
    sizes = {key: i for i, key in enumerate(shuffled)}
    before = store.counters.snapshot()
    infos = list(store.list(prefix))
    assert [i.key for i in infos] == expected
    assert all(i.size == sizes[i.key] for i in infos)
    # One LIST per page of PAGE keys, and one for an empty result.
    pages = max(1, math.ceil(len(expected) / PAGE))
    assert store.counters.get(LIST) - before[LIST] == pages
    assert store.counters.snapshot() == counts(PUT=len(LIST_KEYS), LIST=pages)


def test_list_is_lazy_and_counts_pages_as_fetched(store: ObjectStore) -> None:
    for i in range(7):
        store.put(f"k{i}", b"v")
    it = store.list()
    assert store.counters.get(LIST) == 0  # nothing is sent before iteration starts
    assert [next(it).key for _ in range(PAGE)] == ["k0", "k1", "k2"]
    assert store.counters.get(LIST) == 1
    assert next(it).key == "k3"
    assert store.counters.get(LIST) == 2
    assert [i.key for i in it] == ["k4", "k5", "k6"]
    assert store.counters.get(LIST) == 3


def test_counters_are_exact(store: ObjectStore) -> None:
    store.put("l0/file", payload(100))
    assert store.get_range("l0/file", 10, 50) == payload(100)[10:50]
    assert store.counters.snapshot() == counts(PUT=1, GET=1)
    assert (store.counters.bytes_written, store.counters.bytes_read) == (100, 40)


# --- async stores ------------------------------------------------------------------------------------------


async def test_async_put_get_range_and_counters(async_store: AsyncObjectStore) -> None:
    data = payload(5000)
    await async_store.put("l0/obj", data)
    assert await async_store.get("l0/obj") == data
    assert await async_store.get_range("l0/obj", 100, 200) == data[100:200]
    assert await async_store.get_range("l0/obj", 4990, 6000) == data[4990:]
    assert await async_store.get_range("l0/obj", 5000, 5010) == b""
    assert await async_store.get_range("l0/obj", 7, 7) == b""
    with pytest.raises(ObjectNotFound):
        await async_store.get("l0/missing")
    with pytest.raises(ObjectNotFound):
        await async_store.get_range("l0/missing", 0, 1)
    assert async_store.counters.snapshot() == counts(PUT=1, GET=6)
    assert async_store.counters.bytes_read == 5000 + 100 + 10


async def test_async_s3_put_hands_the_transport_the_whole_body_at_once(
    moto_server: str, s3_bucket: str
) -> None:
    """A flush's PUT reaches aiohttp's writer as one write (storage/objectstore/s3async.py's
    _OneWritePayload), not 256 KiB pieces with a turn of the event loop between each; and a body of many
    such pieces still arrives whole."""
    from aiobotocore._endpoint_helpers import _IOBaseWrapper  # what aiobotocore hands aiohttp as the body

    from storage.objectstore.s3async import _OneWritePayload, _SharedBytesIO

    data = payload(3 * 1024 * 1024 + 17)
    chosen = aiohttp.payload.PAYLOAD_REGISTRY.get(_IOBaseWrapper(_SharedBytesIO(data)))
    assert isinstance(chosen, _OneWritePayload)
    writes: list[bytes] = []

    class Writer:
        async def write(self, chunk: memoryview) -> None:
            writes.append(bytes(chunk))

    await chosen.write_with_length(Writer(), None)  # type: ignore[arg-type]
    assert writes == [data]
    await chosen.write_with_length(Writer(), 10)  # a resend starts over; a length bound is honoured
    assert writes[1] == data[:10]

    store = AsyncS3ObjectStore(s3_bucket, endpoint_url=moto_server)
    sent: list[dict[str, bytes]] = []
    try:
        client = await store._get_client()
        client.meta.events.register(
            "before-send.s3.PutObject", lambda request, **_: sent.append(dict(request.headers.items()))
        )
        await store.put("l0/big", data)
        assert await store.get("l0/big") == data
    finally:
        await store.close()
    # The body's CRC-32C, for S3 to check, and no second checksum computed by botocore.
    [headers] = sent
    assert headers["x-amz-checksum-crc32c"] == base64.b64encode(crc32c(data).to_bytes(4, "big"))
    assert not [
        name for name in headers if name.lower().startswith("x-amz-checksum-") and "crc32c" not in name
    ]


def test_s3_put_sends_its_body_as_one_buffer_with_its_crc32c_and_no_other_checksum(
    moto_server: str, s3_bucket: str
) -> None:
    """The synchronous store (compaction's uploads) sends a PUT's bytes as they are, which urllib3 writes
    with one sendall, not a BytesIO it sends 16 KiB at a time taking the GIL back for each; with the body's
    CRC-32C and no checksum botocore computes itself. GETs are not checksummed by botocore either (readers
    check every chunk's CRC-32C), and a body arrives whole."""
    store = S3ObjectStore(s3_bucket, endpoint_url=moto_server)
    sent: list[tuple[object, dict[str, bytes]]] = []
    store._client.meta.events.register(
        "before-send.s3.PutObject",
        lambda request, **_: sent.append((request.body, dict(request.headers.items()))),
    )
    data = payload(2 * 1024 * 1024 + 5)
    store.put("l1/big", data)
    assert store.get("l1/big") == data
    [(body, headers)] = sent
    assert isinstance(body, bytes)
    assert body == data
    assert headers["x-amz-checksum-crc32c"] == base64.b64encode(crc32c(data).to_bytes(4, "big"))
    assert not [
        name for name in headers if name.lower().startswith("x-amz-checksum-") and "crc32c" not in name
    ]
    assert store._config.response_checksum_validation == "when_required"


async def test_async_retry_survives_flaky_backend(async_store: AsyncObjectStore) -> None:
    faulty = FaultyAsyncObjectStore(
        async_store, failure_rate=0.5, fail_after_rate=0.3, rng=random.Random(11), kinds=frozenset({PUT, GET})
    )
    clock = ManualClock()
    retrying = RetryingAsyncObjectStore(faulty, RetryPolicy(max_attempts=25), clock, random.Random(12))
    assert retrying.counters is async_store.counters
    assert retrying.url == async_store.url
    for i in range(10):
        await retrying.put(f"k{i}", payload(300, seed=i))
    for i in range(10):
        assert await retrying.get(f"k{i}") == payload(300, seed=i)
    assert faulty.injected_before.get(PUT) > 0
    assert faulty.injected_after.get(PUT) > 0
    # The backend saw every attempt that got past the injected refusals, and nothing else.
    assert async_store.counters.snapshot() == counts(
        PUT=10 + faulty.injected_after.get(PUT), GET=10 + faulty.injected_after.get(GET)
    )
    assert clock.monotonic() > 0


# --- retry and fault injection -----------------------------------------------------------------------------


def test_retry_survives_flaky_backend(store: ObjectStore) -> None:
    faulty = FaultyObjectStore(
        store, failure_rate=0.5, fail_after_rate=0.5, rng=random.Random(7), kinds=frozenset({PUT, GET})
    )
    clock = ManualClock()
    policy = RetryPolicy(max_attempts=30, base_delay_s=0.05, max_delay_s=2.0)
    retrying = RetryingObjectStore(faulty, policy, clock, random.Random(8))
    assert retrying.counters is store.counters
    assert retrying.url == store.url
    for i in range(20):
        retrying.put(f"l0/{i:03}", payload(200, seed=i))
    for i in range(20):
        assert retrying.get(f"l0/{i:03}") == payload(200, seed=i)
    injected_after_put = faulty.injected_after.get(PUT)
    assert faulty.injected_before.get(PUT) > 0
    assert injected_after_put > 0
    # Uploads whose response was lost were really performed, so the backend counted extra PUTs.
    assert store.counters.snapshot() == counts(
        PUT=20 + injected_after_put, GET=20 + faulty.injected_after.get(GET)
    )
    injected = sum(faulty.injected_before.get(k) + faulty.injected_after.get(k) for k in (PUT, GET))
    assert 0 < clock.monotonic() <= injected * policy.max_delay_s


def test_retry_gives_up_after_max_attempts(store: ObjectStore) -> None:
    store.put("obj", b"data")
    faulty = FaultyObjectStore(store, failure_rate=1.0, rng=random.Random(1), kinds=frozenset({GET}))
    clock = ManualClock()
    policy = RetryPolicy(max_attempts=4, base_delay_s=0.1, max_delay_s=0.3)
    retrying = RetryingObjectStore(faulty, policy, clock, random.Random(2))
    with pytest.raises(TransientStoreError) as excinfo:
        retrying.get("obj")
    error = excinfo.value
    assert isinstance(error, Unavailable)
    assert (error.retriable, error.code) == (True, 50003)
    assert faulty.injected_before.get(GET) == 4
    assert store.counters.snapshot() == counts(PUT=1)
    # Three sleeps, capped at 0.1, 0.2 and 0.3 s.
    assert 0 < clock.monotonic() <= 0.1 + 0.2 + 0.3


def test_retry_does_not_repeat_permanent_errors(store: ObjectStore) -> None:
    clock = ManualClock()
    retrying = RetryingObjectStore(store, RetryPolicy(), clock, random.Random(0))
    with pytest.raises(ObjectNotFound):
        retrying.get("missing")
    with pytest.raises(ObjectNotFound):
        retrying.open_stream("missing")
    assert store.counters.snapshot() == counts(GET=2)
    assert clock.monotonic() == 0


@pytest.mark.parametrize(("start", "end"), [(1000, 45_000), (0, None)])
def test_stream_resumes_at_the_right_position(store: ObjectStore, start: int, end: int | None) -> None:
    data = payload(50_000, seed=3)
    store.put("obj", data)
    faulty = FaultyObjectStore(
        store, failure_rate=0.2, stream_failure_rate=0.05, rng=random.Random(3), kinds=frozenset({GET})
    )
    retrying = RetryingObjectStore(faulty, RetryPolicy(max_attempts=10), ManualClock(), random.Random(4))
    assert read_all(retrying.open_stream("obj", start, end), piece=211) == data[start:end]
    breaks = faulty.injected_mid_stream.get(GET)
    assert breaks > 0
    # Each break costs exactly one more GET: a re-open at the first byte the caller has not seen.
    assert store.counters.snapshot() == counts(PUT=1, GET=1 + breaks)
    assert faulty.injected_before.get(GET) > 0  # some re-opens were refused and retried too


def test_retrying_list_resumes_after_a_transient_failure(store: ObjectStore) -> None:
    keys = [f"k{i}" for i in range(7)]
    for key in keys:
        store.put(key, b"v")
    faulty = FaultyObjectStore(
        store, failure_rate=0.3, stream_failure_rate=0.2, rng=random.Random(2), kinds=frozenset({LIST})
    )
    retrying = RetryingObjectStore(faulty, RetryPolicy(max_attempts=20), ManualClock(), random.Random(3))
    # Every key exactly once and in order, although listings broke part-way and were restarted.
    assert [i.key for i in retrying.list()] == keys
    assert faulty.injected_mid_stream.get(LIST) > 0
    assert faulty.injected_before.get(LIST) > 0


# --- local backend specifics -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["", "/abs", "a//b", "a/", "..", "../x", "a/../b", "./a", "a/./b", "a\x00b", ".tmp-x", "d/.tmp-1"]
)
def test_local_rejects_unsafe_keys(tmp_path: Path, key: str) -> None:
    store = LocalObjectStore(tmp_path)
    with pytest.raises(ValueError, match="key"):
        store.put(key, b"x")
    with pytest.raises(ValueError, match="key"):
        store.get(key)
    with pytest.raises(ValueError, match="key"):
        store.delete(key)
    assert store.counters.snapshot() == counts()
    assert list(tmp_path.iterdir()) == []


def test_local_put_leaves_no_temp_files_and_list_ignores_crash_leftovers(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    for i in range(5):
        store.put(f"l0/{i}", payload(100, seed=i))
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(TEMP_PREFIX)]
    # What a crash in the middle of a put leaves behind: a temp file next to the objects.
    (tmp_path / "l0" / f"{TEMP_PREFIX}crashed").write_bytes(b"partial")
    (tmp_path / f"{TEMP_PREFIX}top").write_bytes(b"partial")
    assert [i.key for i in store.list()] == [f"l0/{i}" for i in range(5)]
    assert [i.key for i in store.list(".tmp")] == []


def test_local_put_writes_pieces_beyond_one_writev_in_order(tmp_path: Path) -> None:
    """More pieces than one writev takes (IOV_MAX, 1024), of every kind a flush hands over, empty ones too."""
    rng = random.Random(7)
    pieces: list[bytes | bytearray | memoryview] = []
    for i in range(2500):
        raw = rng.randbytes(rng.choice([0, 1, 17, 4096]))
        pieces.append(
            raw if i % 3 == 0 else bytearray(raw) if i % 3 == 1 else memoryview(b"<" + raw + b">")[1:-1]
        )
    store = LocalObjectStore(tmp_path)
    store.put("l0/many", pieces)
    assert store.get("l0/many") == b"".join(bytes(p) for p in pieces)
    assert (tmp_path / "l0" / "many").stat().st_mode & 0o777 == 0o600


def test_local_put_that_fails_leaves_no_temp_file_and_the_old_object(tmp_path: Path) -> None:
    """The rename is refused (the final name is a directory of other objects): the temporary file, written
    and fsynced already, is removed, and what was there stays."""
    store = LocalObjectStore(tmp_path)
    store.put("d/x/y", b"kept")
    with pytest.raises(ObjectStoreError, match="put 'd/x' failed"):
        store.put("d/x", [b"new", b" bytes"])
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(TEMP_PREFIX)]
    assert store.get("d/x/y") == b"kept"


# Run in a process of its own: a file size limit of 10 bytes makes the first writev of 5 + 8 + 2 bytes
# short (10 written) and the one that resumes it fail with EFBIG (SIGXFSZ ignored), after the create.
_SHORT_WRITE_THEN_FAILURE = """
import resource, signal, sys
from pathlib import Path
from storage.errors import ObjectStoreError
from storage.objectstore.local import TEMP_PREFIX, LocalObjectStore
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
root = Path(sys.argv[1])
store = LocalObjectStore(root)
store.put("l0/obj", b"old")
resource.setrlimit(resource.RLIMIT_FSIZE, (10, 10))
pieces = [b"aaaaa", bytearray(b"bbbbbbbb"), memoryview(b"cc")]
try:
    store.put("l0/obj", pieces)
except ObjectStoreError as exc:
    print("refused:", exc.message)
print("pieces kept:", pieces == [b"aaaaa", bytearray(b"bbbbbbbb"), memoryview(b"cc")])
print("temp files:", sorted(p.name for p in root.rglob(TEMP_PREFIX + "*")))
print("object:", store.get("l0/obj"))
"""


def test_local_put_resumes_a_short_write_and_cleans_up_a_failed_one(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _SHORT_WRITE_THEN_FAILURE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    assert out[0].startswith("refused:"), out
    assert "File too large" in out[0], out
    assert out[1:] == ["pieces kept: True", "temp files: []", "object: b'old'"]


def test_native_write_file_takes_names_within_its_directory_only(tmp_path: Path) -> None:
    for temp, final in [("a/b", "obj"), ("tmp", "../obj"), ("", "obj"), ("tmp", "")]:
        with pytest.raises(ValueError, match="without '/'"):
            write_file(tmp_path, temp, final, [b"x"])
    assert list(tmp_path.iterdir()) == []


def test_local_key_below_an_object_is_a_store_error(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    store.put("a", b"object")
    with pytest.raises(ObjectStoreError):
        store.put("a/b", b"x")
    with pytest.raises(ObjectNotFound):
        store.get("a/b")
    assert [i.key for i in store.list()] == ["a"]


async def test_local_sync_and_async_share_counters(tmp_path: Path) -> None:
    counters = RequestCounters()
    sync = LocalObjectStore(tmp_path, counters=counters)
    async_store = LocalAsyncObjectStore(tmp_path, counters=counters)
    await async_store.put("k", b"value")
    assert sync.get("k") == b"value"
    assert counters.snapshot() == counts(PUT=1, GET=1)


async def test_local_put_says_durable_from_its_thread_before_it_returns(tmp_path: Path) -> None:
    """``ON_DURABLE``: the local store calls the caller's hook in the thread that wrote the object, once
    the object is in place, through the retry wrapper as the agent stacks it; a failed put does not."""
    local = LocalAsyncObjectStore(tmp_path)
    store = RetryingAsyncObjectStore(local, RetryPolicy(), ManualClock(), random.Random(1))
    seen: list[tuple[str, bytes, bool]] = []
    main = threading.get_ident()

    def put_with_hook(key: str) -> asyncio.Future[None]:
        def durable() -> None:
            seen.append((key, local.sync.get(key), threading.get_ident() != main))

        token = ON_DURABLE.set(durable)
        try:
            return asyncio.ensure_future(store.put(key, b"value"))
        finally:
            ON_DURABLE.reset(token)

    await put_with_hook("k")
    assert seen == [("k", b"value", True)]
    with pytest.raises(ObjectStoreError):
        await put_with_hook("k/below-an-object")
    await store.put("other", b"v")  # the hook belongs to the puts started while it was set
    assert seen == [("k", b"value", True)]


# --- S3 error translation ----------------------------------------------------------------------------------


def test_s3_wrong_bucket_is_a_store_error(moto_server: str) -> None:
    store = S3ObjectStore("strata-no-such-bucket", endpoint_url=moto_server)
    try:
        for call in (lambda: store.put("k", b"v"), lambda: store.get("k"), lambda: list(store.list())):
            with pytest.raises(ObjectStoreError):
                call()
        # A HEAD answer has no body, so a missing bucket looks exactly like a missing key.
        with pytest.raises(ObjectNotFound):
            store.head("k")
        assert store.counters.snapshot() == counts(PUT=1, GET=1, LIST=1, HEAD=1)
    finally:
        store.close()


async def test_async_s3_wrong_bucket_is_a_store_error(moto_server: str) -> None:
    store = AsyncS3ObjectStore("strata-no-such-bucket", endpoint_url=moto_server)
    try:
        with pytest.raises(ObjectStoreError):
            await store.put("k", b"v")
        with pytest.raises(ObjectStoreError):
            await store.get("k")
        assert store.counters.snapshot() == counts(PUT=1, GET=1)
    finally:
        await store.close()


def test_s3_connection_refused_is_transient_and_each_attempt_is_one_request(moto_server: str) -> None:
    store = S3ObjectStore("bucket", endpoint_url=f"http://127.0.0.1:{closed_port()}", connect_timeout_s=2)
    try:
        with pytest.raises(TransientStoreError):
            store.put("k", b"v")
        with pytest.raises(TransientStoreError):
            store.get("k")
        with pytest.raises(TransientStoreError):
            store.head("k")
        with pytest.raises(TransientStoreError):
            list(store.list())
        assert store.counters.snapshot() == counts(PUT=1, GET=1, HEAD=1, LIST=1)
        # botocore does not retry behind our back: three attempts are three requests.
        retrying = RetryingObjectStore(store, RetryPolicy(max_attempts=3), ManualClock(), random.Random(0))
        with pytest.raises(TransientStoreError):
            retrying.get("k")
        assert store.counters.get(GET) == 1 + 3
    finally:
        store.close()


async def test_async_s3_connection_refused_is_transient(moto_server: str) -> None:
    store = AsyncS3ObjectStore(
        "bucket", endpoint_url=f"http://127.0.0.1:{closed_port()}", connect_timeout_s=2
    )
    try:
        with pytest.raises(TransientStoreError):
            await store.put("k", b"v")
        with pytest.raises(TransientStoreError):
            await store.get_range("k", 0, 10)
        assert store.counters.snapshot() == counts(PUT=1, GET=1)
    finally:
        await store.close()


SERVER_FAILURES = [
    pytest.param(503, "SlowDown", TransientStoreError, id="503-SlowDown"),
    pytest.param(500, "InternalError", TransientStoreError, id="500-InternalError"),
    pytest.param(503, "ServiceUnavailable", TransientStoreError, id="503-ServiceUnavailable"),
    pytest.param(400, "RequestTimeout", TransientStoreError, id="400-RequestTimeout"),
    pytest.param(0, "", TransientStoreError, id="connection-dropped"),
    pytest.param(403, "AccessDenied", ObjectStoreError, id="403-AccessDenied"),
]


@pytest.mark.parametrize(("status", "code", "expected"), SERVER_FAILURES)
def test_s3_server_failures_are_classified_and_sent_once(
    failing_s3: Callable[[int, str], FailingS3], status: int, code: str, expected: type[StrataError]
) -> None:
    server = failing_s3(status, code)
    store = S3ObjectStore("bucket", endpoint_url=server.url)
    try:
        for call in (
            lambda: store.put("k", b"v"),
            lambda: store.get("k"),
            lambda: store.get_range("k", 0, 5),
            lambda: read_all(store.open_stream("k"), 10),
            lambda: list(store.list()),
            lambda: store.delete("k"),
        ):
            with pytest.raises(expected):
                call()
        # Exactly one request per call reached the server: botocore did not retry behind our back.
        assert store.counters.snapshot() == counts(PUT=1, GET=3, LIST=1, DELETE=1)
        assert server.requests == 6
    finally:
        store.close()


@pytest.mark.parametrize(("status", "code", "expected"), SERVER_FAILURES)
async def test_async_s3_server_failures_are_classified_and_sent_once(
    failing_s3: Callable[[int, str], FailingS3], status: int, code: str, expected: type[StrataError]
) -> None:
    server = failing_s3(status, code)
    store = AsyncS3ObjectStore("bucket", endpoint_url=server.url)
    try:
        with pytest.raises(expected):
            await store.put("k", b"v")
        with pytest.raises(expected):
            await store.get("k")
        with pytest.raises(expected):
            await store.get_range("k", 0, 5)
        assert store.counters.snapshot() == counts(PUT=1, GET=2)
        # aiohttp transparently resends an idempotent request once when the server closes the connection
        # without answering (RFC 9112 9.3.1), and has no public switch for it: the one known case where the
        # async store sends more requests than it counts (see s3async.py).
        assert server.requests == (6 if status == 0 else 3)
    finally:
        await store.close()


def test_s3_prefixes_isolate_stores(moto_server: str, s3_bucket: str, moto_admin_client: S3Client) -> None:
    short = S3ObjectStore(s3_bucket, "a", endpoint_url=moto_server)
    longer = S3ObjectStore(s3_bucket, "ab/", endpoint_url=moto_server)
    raw = moto_admin_client
    try:
        short.put("k", b"1")
        longer.put("k", b"2")
        assert (short.get("k"), longer.get("k")) == (b"1", b"2")
        assert [i.key for i in short.list()] == ["k"]
        assert [i.key for i in longer.list()] == ["k"]
        stored = [o["Key"] for o in raw.list_objects_v2(Bucket=s3_bucket).get("Contents", [])]
        assert stored == ["a/k", "ab/k"]
        assert (short.url, longer.url) == (f"s3://{s3_bucket}/a", f"s3://{s3_bucket}/ab")
    finally:
        short.close()
        longer.close()


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("NoSuchKey", 404, ObjectNotFound),
        ("404", 404, ObjectNotFound),
        ("SlowDown", 503, TransientStoreError),
        ("ServiceUnavailable", 503, TransientStoreError),
        ("InternalError", 500, TransientStoreError),
        ("RequestTimeout", 400, TransientStoreError),
        ("Throttling", 400, TransientStoreError),
        ("SomethingNew", 502, TransientStoreError),
        ("TooManyRequests", 429, TransientStoreError),
        ("AccessDenied", 403, ObjectStoreError),
        ("NoSuchBucket", 404, ObjectStoreError),
        ("InvalidAccessKeyId", 403, ObjectStoreError),
    ],
)
def test_s3_client_error_classification(code: str, status: int, expected: type[StrataError]) -> None:
    error = ClientError(
        {
            "Error": {"Code": code, "Message": "m"},
            "ResponseMetadata": {
                "HTTPStatusCode": status,
                "HTTPHeaders": {},
                "HostId": "",
                "RequestId": "",
                "RetryAttempts": 0,
            },
        },
        "Op",
    )
    assert type(translate_client_error(error, "where")) is expected


# --- the factory -------------------------------------------------------------------------------------------


def test_factory_file_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    absolute = open_object_store(f"file://{tmp_path}/data", retry=None)
    assert isinstance(absolute, LocalObjectStore)
    assert absolute.root == tmp_path / "data"
    assert absolute.url == (tmp_path / "data").as_uri()

    wrapped = open_object_store(absolute.url, clock=ManualClock(), rng=random.Random(0))
    assert isinstance(wrapped, RetryingObjectStore)
    assert isinstance(wrapped.inner, LocalObjectStore)
    assert wrapped.url == absolute.url
    wrapped.put("k", b"v")
    assert absolute.get("k") == b"v"

    monkeypatch.chdir(tmp_path)
    relative = open_object_store("file://rel/dir", retry=None)
    assert isinstance(relative, LocalObjectStore)
    assert relative.root == Path("rel/dir")
    relative.put("x/y", b"z")
    assert (tmp_path / "rel" / "dir" / "x" / "y").read_bytes() == b"z"


async def test_factory_s3_urls_share_counters(moto_server: str, s3_url: str, s3_bucket: str) -> None:
    counters = RequestCounters()
    sync = open_object_store(
        f"{s3_url}/some/prefix",
        endpoint_url=moto_server,
        counters=counters,
        clock=ManualClock(),
        rng=random.Random(0),
    )
    async_store = open_async_object_store(
        f"{s3_url}/some/prefix", endpoint_url=moto_server, counters=counters, clock=ManualClock()
    )
    try:
        assert isinstance(sync, RetryingObjectStore)
        assert isinstance(sync.inner, S3ObjectStore)
        assert isinstance(async_store, RetryingAsyncObjectStore)
        assert isinstance(async_store.inner, LoopThreadAsyncObjectStore)
        assert isinstance(async_store.inner.inner, AsyncS3ObjectStore)
        assert sync.url == async_store.url == f"s3://{s3_bucket}/some/prefix"
        await async_store.put("k", b"from async")
        assert sync.get("k") == b"from async"
        sync.put("j", b"from sync")
        assert await async_store.get_range("j", 5, 9) == b"sync"
        assert counters.snapshot() == counts(PUT=2, GET=2)
        assert [i.key for i in sync.list()] == ["j", "k"]
    finally:
        sync.close()
        await async_store.close()


async def test_async_s3_open_makes_the_client_ahead_of_the_first_request(
    moto_server: str, s3_url: str
) -> None:
    """The agent opens its store at start-up, so the first flush does not wait for botocore's client
    (its service model is loaded and parsed then: seconds on a busy machine). Opening sends nothing."""
    counters = RequestCounters()
    store = open_async_object_store(s3_url, endpoint_url=moto_server, counters=counters, clock=ManualClock())
    await store.open()
    await store.open()  # again: the same client
    assert counters.snapshot() == counts()
    await store.put("k", b"v")
    assert await store.get("k") == b"v"
    assert counters.snapshot() == counts(PUT=1, GET=1)
    await store.close()
    with pytest.raises(RuntimeError, match="closed"):  # open() goes where a first request makes the client
        await store.open()


async def test_factory_async_file_url(tmp_path: Path) -> None:
    store = open_async_object_store(tmp_path.as_uri(), retry=None)
    assert isinstance(store, LocalAsyncObjectStore)
    await store.put("k", b"v")
    assert await store.get("k") == b"v"


@pytest.mark.parametrize(
    "url",
    [
        "",
        "/just/a/path",
        "http://example.com/bucket",
        "gs://bucket",
        "file://",
        "file:",
        "s3://",
        "s3:///prefix",
        "s3://ab",
        "s3://Upper-Case",
        "s3://under_score",
        "s3://bucket?versioning=1",
        "s3://bucket#frag",
        "s3://user@bucket",
        "s3://bucket:9000/x",
        "s3://bucket/a//b",
    ],
)
def test_factory_rejects_bad_urls(url: str) -> None:
    with pytest.raises(SettingsError):
        open_object_store(url)
    with pytest.raises(SettingsError):
        open_async_object_store(url)


def test_bad_endpoint_or_region_is_refused_when_the_store_is_made() -> None:
    """The sync S3 client is made on first use; what making it would refuse is still refused at once."""
    for factory in (open_object_store, open_async_object_store):
        with pytest.raises(SettingsError, match="Invalid endpoint"):
            factory("s3://bucket", endpoint_url="ht!tp://bad url")
        with pytest.raises(SettingsError, match="region"):
            factory("s3://bucket", region="bad region!")
