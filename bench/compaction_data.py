"""The compaction benchmark's datasets: L0 files written the way the agent's flusher writes them.

A dataset is ``fileformat.FileBuilder`` files of ``records.encode_batch`` batches (base offsets relative to
the chunk, one chunk per partition per file), each PUT to a local directory bucket and committed with one
``commit_flush`` to a SQLite metadata database, without HTTP. Keys and values are deterministic for a seed,
and each value starts with ``<key>:<round>:``, so that the output of a compaction can be checked: exactly
one record per key, holding its last round's value.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from storage import fileformat, records
from storage.clock import SystemClock
from storage.keys import new_object_key
from storage.metadata import LEVEL_INGEST, NewChunk, NewFile, open_metadata_store
from storage.objectstore import RequestCounters, open_object_store

TOPIC = "bench-compact"


@dataclass(frozen=True)
class DatasetSpec:
    """Keys ``0..keys-1``; key k lives in partition ``k % partitions``.

    Round 0 writes every key; rounds 1..updates-1 write every key (``update_every == 1``) or every
    ``update_every``-th key. Each round goes over its keys in a fresh random order. A record's value starts
    with ``<key>:<round>:`` so the output can be checked.
    """

    name: str
    partitions: int
    keys: int
    updates: int
    value_bytes: int
    batch_records: int
    file_bytes: int
    update_every: int = 1
    seed: int = 1

    def key_bytes(self, k: int) -> bytes:
        return b"k%09d" % k

    def last_round(self, k: int) -> int:
        if self.updates == 1 or self.update_every == 1:
            return self.updates - 1
        return self.updates - 1 if k % self.update_every == 0 else 0

    @property
    def record_estimate(self) -> int:
        # length, attributes, timestampDelta, offsetDelta, key length, key, value length, value, headers
        return 1 + 1 + 2 + 3 + 1 + 10 + 2 + self.value_bytes + 1 + 1

    @property
    def expected_records(self) -> int:
        extra = (
            self.keys if self.update_every == 1 else (self.keys + self.update_every - 1) // self.update_every
        )
        return self.keys + (self.updates - 1) * extra


def _partition_stream(spec: DatasetSpec, partition: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Per round: (round, keys of this partition written in that round, in the round's order)."""
    own = np.arange(partition, spec.keys, spec.partitions, dtype=np.int64)
    for r in range(spec.updates):
        keys = own if r == 0 or spec.update_every == 1 else own[own % spec.update_every == 0]
        order = keys[rng.permutation(keys.size)]
        # yield (round, key) pairs in slices, so that no list of all records exists at once
        for start in range(0, order.size, 65536):
            part = order[start : start + 65536]
            yield np.stack([np.full(part.size, r, dtype=np.int64), part], axis=1)


class _Source:
    """Pulls ``n`` (round, key) pairs at a time from one partition's stream."""

    def __init__(self, it: Iterator[np.ndarray]) -> None:
        self.it = it
        self.buf = np.empty((0, 2), dtype=np.int64)
        self.done = False

    def take(self, n: int) -> np.ndarray:
        while self.buf.shape[0] < n and not self.done:
            try:
                self.buf = np.concatenate([self.buf, next(self.it)])
            except StopIteration:
                self.done = True
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


@dataclass
class _Encoder:
    """Record values from a shared pool of printable bytes; one millisecond of timestamp per 1000 records,
    starting an hour ago (older than any compaction lag)."""

    spec: DatasetSpec
    pool: bytes
    ts: int
    n_records: int = 0
    key_cache: dict[int, bytes] = field(default_factory=dict)

    def chunk(self, pairs: np.ndarray) -> tuple[bytearray, int, int]:
        """One partition's chunk of (round, key) ``pairs``: its bytes and min/max timestamps."""
        spec, vb = self.spec, self.spec.value_bytes
        buf = bytearray()
        rel = 0
        min_ts = self.ts + self.n_records // 1000
        for start in range(0, pairs.shape[0], spec.batch_records):
            recs = []
            for j, (r, k) in enumerate(pairs[start : start + spec.batch_records].tolist()):
                key = self.key_cache.get(k)
                if key is None:
                    key = self.key_cache[k] = spec.key_bytes(k)
                head = b"%d:%d:" % (k, r)
                at = (k * 131 + r * 17) % (len(self.pool) - vb)
                value = (head + self.pool[at : at + vb])[:vb]
                recs.append(records.Record(rel + j, self.ts + self.n_records // 1000, key, value))
                self.n_records += 1
            buf += records.encode_batch(recs, rel)
            rel += len(recs)
        return buf, min_ts, self.ts + (self.n_records - 1) // 1000


def generate(spec: DatasetSpec, root: Path) -> dict[str, Any]:
    """Write the dataset's L0 files into ``root/bucket`` and commit them to ``root/metadata.db``."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    store = open_object_store(f"file://{root / 'bucket'}", counters=RequestCounters())
    meta = open_metadata_store(f"sqlite:///{root / 'metadata.db'}")
    clock = SystemClock()
    rng = random.Random(spec.seed)
    nrng = np.random.default_rng(spec.seed)
    encoder = _Encoder(
        spec, bytes(nrng.integers(32, 127, size=1 << 16, dtype=np.uint8)), clock.now_ms() - 3_600_000
    )
    meta.create_topic(TOPIC, spec.partitions, {"cleanup.policy": "compact"}, clock.now_ms())
    sources = [_Source(_partition_stream(spec, p, nrng)) for p in range(spec.partitions)]
    per_chunk = max(1, spec.file_bytes // spec.partitions // spec.record_estimate)
    started = time.perf_counter()
    data_bytes = file_bytes = files = 0
    while not all(s.done and s.buf.shape[0] == 0 for s in sources):
        builder = fileformat.FileBuilder()
        chunks: list[NewChunk] = []
        for p, source in enumerate(sources):
            pairs = source.take(per_chunk)
            if pairs.shape[0] == 0:
                continue
            buf, min_ts, max_ts = encoder.chunk(pairs)
            n = pairs.shape[0]
            m = builder.add_chunk(
                TOPIC,
                p,
                buf,
                record_count=n,
                last_offset_delta=n - 1,
                min_timestamp=min_ts,
                max_timestamp=max_ts,
            )
            chunks.append(NewChunk(TOPIC, p, n, m.position, m.length, min_ts, max_ts, m.crc))
            data_bytes += len(buf)
        if not chunks:
            break
        data = builder.finish()
        object_key = new_object_key(LEVEL_INGEST, clock, rng)
        store.put(object_key, data)
        meta.commit_flush(
            NewFile(object_key, len(data), LEVEL_INGEST, clock.now_ms()), chunks, [], clock.now_ms()
        )
        files += 1
        file_bytes += len(data)
    seconds = time.perf_counter() - started
    store.close()
    meta.close()
    if encoder.n_records != spec.expected_records:
        raise RuntimeError(f"wrote {encoder.n_records} records, expected {spec.expected_records}")
    return {
        "spec": asdict(spec),
        "files": files,
        "records": encoder.n_records,
        "keys": spec.keys,
        "data_bytes": data_bytes,
        "file_bytes": file_bytes,
        "records_per_chunk": per_chunk,
        "generate_s": round(seconds, 2),
    }


def clone(src: Path, dst: Path) -> None:
    """A copy of a dataset that compaction may change: hard links for the (immutable) objects."""
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    shutil.copytree(src / "bucket", dst / "bucket", copy_function=os.link)
    for name in os.listdir(src):
        if name.startswith("metadata.db"):
            shutil.copy2(src / name, dst / name)


def verify_output(spec: DatasetSpec, root: Path) -> dict[str, Any]:
    """Read every live chunk back: exactly one record per key, with the value of its last round."""
    store = open_object_store(f"file://{root / 'bucket'}", retry=None)
    meta = open_metadata_store(f"sqlite:///{root / 'metadata.db'}")
    seen = np.zeros(spec.keys, dtype=np.int8)
    wrong = duplicates = 0
    n = 0
    started = time.perf_counter()
    try:
        for p in range(spec.partitions):
            for fc in meta.partition_chunks(TOPIC, p):
                c = fc.chunk
                data = store.get_range(c.object_key, c.position, c.position + c.length)
                fileformat.verify_chunk(data, c.crc)
                for rec in records.decode_records(data, offset_base=c.base_offset):
                    n += 1
                    assert rec.key is not None
                    assert rec.value is not None
                    k = int(rec.key[1:])
                    if seen[k]:
                        duplicates += 1
                    seen[k] = 1
                    head = rec.value.split(b":", 2)
                    if int(head[0]) != k or int(head[1]) != spec.last_round(k):
                        wrong += 1
    finally:
        store.close()
        meta.close()
    missing = int(spec.keys - int(seen.sum()))
    return {
        "records_out": n,
        "keys_present": int(seen.sum()),
        "latest_lost": missing + wrong,
        "missing_keys": missing,
        "stale_or_wrong_values": wrong,
        "duplicates": duplicates,
        "verify_s": round(time.perf_counter() - started, 2),
        "ok": missing == 0 and wrong == 0 and duplicates == 0,
    }
