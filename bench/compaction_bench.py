"""Compaction benchmark: throughput against a raw scan, offset-map memory, dedup lag, requests per file.

    .venv/bin/python bench/compaction_bench.py --scenario throughput|memory|lag|all [--profile] ...

Scenarios (targets from the compaction issue; see docs/benchmarks.md):

throughput
    For 1 KiB and 100-byte values (``--value-sizes``), write L0 files the way the agent's flusher does
    (``fileformat.FileBuilder`` + ``records.encode_batch``, batch base offsets relative to the chunk, one
    ``commit_flush`` per file on SQLite) into a local directory bucket, without HTTP: a compacted topic of
    ``--partitions`` partitions, every key updated ``--updates`` times (rounds over all keys, each round in a
    fresh random order, so every file holds a slice of one or two rounds). Then, ``--repeat`` times, in
    fresh subprocesses:
    - physical floor: every live file read once (``store.get``) and CRC-32C computed over all of its bytes
      (C code, the ``crc32c`` package): what reading the input costs before any record is looked at;
    - raw scan: every live file read once (``store.get``), every chunk CRC-checked and decoded
      (``records.decode_records``, values included) and every key hashed (``KeyHasher.hash_many``);
    - key scan (for analysis only): the same, but ``iter_batches`` + ``scan_batch_reference`` (values
      skipped), the Python reference of what each compaction pass reads per record;
    - compaction: the real ``CompactionRound`` (planner with ``force`` -> one clean job over every file,
      because due partitions that share files are cleaned by one job) on a hard-linked clone of the
      dataset, with ``JobStats`` and ``RequestCounters``.
    Rates are of *input*: bytes of the input chunks and records read, over the job's wall time
    (``run_jobs``). The output of the last compaction is read back and checked: one record per key, holding
    its last version. GETs per input file and PUTs per output file come from the same jobs.

memory
    ``--mem-keys`` (5,000,000) distinct keys with ``--mem-value-bytes`` values in ONE partition (the map is
    per partition), every key written once and every ``--mem-update-every``-th key written again at the
    end; one compaction job with the default 128 MiB map in a subprocess that reports its own peak RSS
    (VmHWM), an RSS timeline (sampled every 20 ms) and the RSS at the start and end of each pass. Rounds are
    repeated while the job reports partial cleaning (map full), up to ``--mem-max-rounds``. The parent then
    reads the output back and checks that every key's latest value survived, and nothing else did.

lag
    A real ``strata serve`` (role all, embedded defaults, default planner/runner settings) on a free
    127.0.0.1 port. ``--lag-keys`` keys, each updated every ``--lag-update-s`` seconds (requests of
    ``--lag-batch`` keys, evenly spaced, sent by ``--lag-producers`` concurrent lanes because each ack waits
    for a flush), optionally after ``--lag-preload-keys`` cold keys written once (a live, clean part of the
    log for the dirty ratio to be measured against), for ``--lag-duration`` seconds, while every partition
    is read from offset 0 every ``--lag-poll-s`` seconds. ``--lag-cold-overwrites`` of the cold keys are
    written once more, evenly spread over the measured window (an overwrite whose replaced record sits in
    the cleaned part, often in L2). ``--lag-max-compaction-lag-ms`` sets the topic's
    ``max.compaction.lag.ms`` (default: none, Kafka's default), the bound the planner must keep. For every
    overwritten (partition, offset), the lag is the time from the ack of the overwrite to the end of the
    first poll that no longer returns the old offset (an upper bound; resolution = the poll interval).
    Overwrites acked in the warm-up or too close to the end to observe a lag of ``--lag-horizon-s`` are left
    out. The figures are over every overwrite, and again for the cold keys alone (``cold``). Every poll also
    checks that each key's latest acknowledged value is still there.

``--profile`` adds one compaction per value size under py-spy (``--format raw``, 250 Hz); the folded
stacks go to bench/results/ and the top functions into the JSON. The machine may be shared: each
subprocess reports its CPU time next to its wall time, and the load other processes put on the machine
during it ("other cores", from /proc/stat), so noisy figures can be spotted and re-run.

Results: tables on stdout, JSON in bench/results/compaction-<time>.json (ignored by git).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
if str(ROOT) not in sys.path:  # run as a script: make the project importable without installing it
    sys.path.insert(0, str(ROOT))

import crc32c  # noqa: E402
import numpy as np  # noqa: E402

from planner.offset_map import KeyHasher  # noqa: E402
from storage import fileformat, records  # noqa: E402
from storage.clock import SystemClock  # noqa: E402
from storage.keys import new_object_key  # noqa: E402
from storage.metadata import LEVEL_INGEST, NewChunk, NewFile, open_metadata_store  # noqa: E402
from storage.objectstore import GET, RequestCounters, open_object_store  # noqa: E402
from storage.records.scan import scan_batch_reference  # noqa: E402

MiB = 1024 * 1024
RESULTS_DIR = BENCH_DIR / "results"
PYTHON = sys.executable
STRATA = Path(PYTHON).with_name("strata")
PY_SPY = Path(PYTHON).with_name("py-spy")
TOPIC = "bench-compact"
CLK_TCK = os.sysconf("SC_CLK_TCK")

# Targets from the issue.
TARGET_RATIO = 0.50  # compaction >= 50% of the raw scan speed
# Issue 10 (hot paths): records/s of input by value size (1 KiB, 100 B).
TARGET_RECORDS_S = {1024: 500_000, 100: 700_000}
TARGET_KEYS = 5_000_000  # distinct keys deduplicated in one pass within 128 MiB
TARGET_BYTES_PER_KEY = 24.0
TARGET_LAG_S = 60.0
TARGET_RSS_HEADROOM_MIB = 200.0  # worker RSS <= map size + 200 MiB
TARGET_GETS_PER_INPUT = 2.0
TARGET_PUTS_PER_OUTPUT = 1.0

COLD_KEY = 1_000_000_000  # lag scenario: acks of cold keys carry COLD_KEY + their number


# --- small helpers ----------------------------------------------------------------------------------------
def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def status_kib(field: str, pid: str = "self") -> int:
    """A ``VmXxx:`` line of /proc/<pid>/status in KiB (-1 if unavailable)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return -1
    return -1


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def system_busy_s() -> float:
    """CPU seconds the whole machine spent busy (all cores), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def code_fingerprint() -> dict[str, str]:
    """Hashes of the application sources, so that results can be matched to the code they measured.

    ``compaction`` covers what the throughput and memory scenarios run (planner/, storage/); ``server``
    covers what only the lag scenario adds (agents/, api/).
    """
    import hashlib

    out = {}
    for name, dirs in (("compaction", ("planner", "storage")), ("server", ("agents", "api"))):
        digest = hashlib.sha256()
        for path in sorted(p for d in dirs for p in (ROOT / d).rglob("*.py") if p.is_file()):
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
        out[name] = digest.hexdigest()[:12]
    return out


def machine_info() -> dict[str, Any]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "mem_total_mib": status_total_mem_mib(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "loadavg_at_start": loadavg(),
    }


def status_total_mem_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return -1


class RssSampler:
    """VmRSS of this process every ``interval`` seconds, in a daemon thread: the peak and a timeline."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.t0 = time.perf_counter()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter() - self.t0, status_kib("VmRSS")))
            self._stop.wait(self.interval)

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def peak_between(self, start: float, end: float) -> int:
        inside = [kib for t, kib in self.samples if start <= t <= end]
        return max(inside) if inside else -1

    def timeline(self, points: int = 60) -> list[tuple[float, float]]:
        """At most ``points`` (seconds, MiB) pairs: the maximum of each equal slice of the samples."""
        if not self.samples:
            return []
        step = max(1, len(self.samples) // points)
        out = []
        for i in range(0, len(self.samples), step):
            part = self.samples[i : i + step]
            out.append((round(part[0][0], 2), round(max(k for _, k in part) / 1024, 1)))
        return out


# --- dataset: L0 files written like the agent's flusher --------------------------------------------------
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


def generate(spec: DatasetSpec, root: Path) -> dict[str, Any]:
    """Write the dataset's L0 files into ``root/bucket`` and commit them to ``root/metadata.db``."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    counters = RequestCounters()
    store = open_object_store(f"file://{root / 'bucket'}", counters=counters)
    meta = open_metadata_store(f"sqlite:///{root / 'metadata.db'}")
    clock = SystemClock()
    rng = random.Random(spec.seed)
    nrng = np.random.default_rng(spec.seed)
    pool = bytes(nrng.integers(32, 127, size=1 << 16, dtype=np.uint8))
    meta.create_topic(TOPIC, spec.partitions, {"cleanup.policy": "compact"}, clock.now_ms())
    sources = [_Source(_partition_stream(spec, p, nrng)) for p in range(spec.partitions)]
    per_chunk = max(1, spec.file_bytes // spec.partitions // spec.record_estimate)
    ts = clock.now_ms() - 3_600_000  # an hour ago, one ms per 1000 records: older than any compaction lag
    started = time.perf_counter()
    n_records = data_bytes = file_bytes = files = 0
    key_cache: dict[int, bytes] = {}
    vb = spec.value_bytes
    while not all(s.done and s.buf.shape[0] == 0 for s in sources):
        builder = fileformat.FileBuilder()
        chunks: list[NewChunk] = []
        for p, source in enumerate(sources):
            pairs = source.take(per_chunk)
            if pairs.shape[0] == 0:
                continue
            buf = bytearray()
            rel = 0
            min_ts = ts + n_records // 1000
            for start in range(0, pairs.shape[0], spec.batch_records):
                recs = []
                for j, (r, k) in enumerate(pairs[start : start + spec.batch_records].tolist()):
                    key = key_cache.get(k)
                    if key is None:
                        key = key_cache[k] = spec.key_bytes(k)
                    head = b"%d:%d:" % (k, r)
                    at = (k * 131 + r * 17) % (len(pool) - vb)
                    value = (head + pool[at : at + vb])[:vb]
                    recs.append(records.Record(rel + j, ts + n_records // 1000, key, value))
                    n_records += 1
                buf += records.encode_batch(recs, rel)
                rel += len(recs)
            max_ts = ts + (n_records - 1) // 1000
            meta_chunk = builder.add_chunk(
                TOPIC,
                p,
                buf,
                record_count=rel,
                last_offset_delta=rel - 1,
                min_timestamp=min_ts,
                max_timestamp=max_ts,
            )
            chunks.append(
                NewChunk(
                    TOPIC, p, rel, meta_chunk.position, meta_chunk.length, min_ts, max_ts, meta_chunk.crc
                )
            )
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
    assert n_records == spec.expected_records, (n_records, spec.expected_records)
    return {
        "spec": asdict(spec),
        "files": files,
        "records": n_records,
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


# --- child processes: one compaction job, or the raw scan -------------------------------------------------
def child_compact(args: argparse.Namespace) -> dict[str, Any]:
    from planner.round import CompactionRound, RoundConfig
    from planner.runner import RunnerConfig

    root = Path(args.root)
    sampler = RssSampler().start()
    phases: list[dict[str, Any]] = []

    @contextlib.contextmanager
    def timed(name: str) -> Iterator[None]:
        t0 = time.perf_counter() - sampler.t0
        rss0 = status_kib("VmRSS")
        try:
            yield
        finally:
            t1 = time.perf_counter() - sampler.t0
            phases.append(
                {
                    "phase": name,
                    "start_s": round(t0, 3),
                    "seconds": round(t1 - t0, 3),
                    "rss_start_mib": round(rss0 / 1024, 1),
                    "rss_end_mib": round(status_kib("VmRSS") / 1024, 1),
                    "rss_peak_mib": round(max(sampler.peak_between(t0, t1), rss0) / 1024, 1),
                }
            )

    rss_imports = status_kib("VmRSS")
    counters = RequestCounters()
    store = open_object_store(f"file://{root / 'bucket'}", counters=counters)
    meta = open_metadata_store(f"sqlite:///{root / 'metadata.db'}")
    inputs = meta.live_files()
    input_bytes = sum(f.size for f in inputs)
    config = RoundConfig(runner=RunnerConfig(map_bytes=args.map_mib * MiB))
    compactor = CompactionRound(store, meta, SystemClock(), random.Random(args.seed), "bench-worker", config)
    # Instrumentation only (timings and RSS around each pass and upload): JobRun's phase hook.
    compactor.runner.on_phase = timed
    offset_map = compactor.runner.offset_map
    map_sizes: list[int] = []
    original_clear = offset_map.clear

    def clear() -> None:
        map_sizes.append(offset_map.size)
        original_clear()

    offset_map.clear = clear  # type: ignore[method-assign]
    rss_setup = status_kib("VmRSS")
    rounds = []
    busy0, cpu0, wall0 = system_busy_s(), time.process_time(), time.perf_counter()
    for round_no in range(args.max_rounds):
        t0 = time.perf_counter()
        planned = compactor.planner.plan(TOPIC, force=True)
        t1 = time.perf_counter()
        ran = compactor.run_jobs()
        t2 = time.perf_counter()
        jobs = [{"job_id": job.job_id, "kind": job.kind, **asdict(stats)} for job, stats in ran]
        rounds.append(
            {
                "round": round_no,
                "planned": len(planned),
                "plan_s": round(t1 - t0, 3),
                "jobs_s": round(t2 - t1, 3),
                "jobs": jobs,
            }
        )
        if not ran or not any(j["partial_partitions"] for j in jobs):
            break
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    busy = system_busy_s() - busy0
    sampler.stop()
    result = {
        "input_files": len(inputs),
        "input_file_bytes": input_bytes,
        "rounds": rounds,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "other_cores": round(max(0.0, busy - cpu) / wall, 2) if wall > 0 else None,
        "map_memory_bytes": offset_map.memory_bytes,
        "map_slots": offset_map.slots,
        "map_capacity": offset_map.capacity,
        "map_max_size": max(map_sizes, default=0),
        "counters": counters.snapshot(),
        "rss_after_imports_mib": round(rss_imports / 1024, 1),
        "rss_after_setup_mib": round(rss_setup / 1024, 1),
        "vm_hwm_mib": round(status_kib("VmHWM") / 1024, 1),
        "rss_timeline_mib": sampler.timeline(),
        "phases": phases if len(phases) <= 200 else phases[:200],
    }
    store.close()
    meta.close()
    return result


def child_scan(args: argparse.Namespace) -> dict[str, Any]:
    """The single-pass baselines: read every file once and CRC it (the physical floor), or read every file
    once, decode every record and hash every key (the raw scan)."""
    root = Path(args.root)
    counters = RequestCounters()
    store = open_object_store(f"file://{root / 'bucket'}", counters=counters)
    meta = open_metadata_store(f"sqlite:///{root / 'metadata.db'}")
    files = meta.live_files()
    hasher = KeyHasher.random(random.Random(args.seed))
    out: dict[str, Any] = {"files": len(files)}
    for mode in ("floor", "decode", "scan_batch"):
        n_records = data_bytes = file_bytes = 0
        busy0, cpu0, wall0 = system_busy_s(), time.process_time(), time.perf_counter()
        for f in files:
            data = store.get(f.object_key)
            file_bytes += len(data)
            if mode == "floor":
                crc32c.crc32c(data)
                for cm in fileformat.read_index(data):
                    data_bytes += cm.length
                    n_records += cm.record_count
                continue
            view = memoryview(data)
            for cm in fileformat.read_index(data):
                chunk = view[cm.position : cm.end]
                fileformat.verify_chunk(chunk, cm.crc)
                data_bytes += cm.length
                if mode == "decode":
                    keys = [
                        r.key for r in records.decode_records(chunk, verify_crc=False) if r.key is not None
                    ]
                    n_records += cm.record_count
                else:
                    keys = []
                    for header, batch in records.iter_batches(chunk, verify_crc=False):
                        spans = scan_batch_reference(bytes(batch), header)
                        keys.extend(s.key for s in spans if s.key is not None)
                        n_records += len(spans)
                hasher.hash_many(keys)
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
        busy = system_busy_s() - busy0
        out[mode] = {
            "records": n_records,
            "data_bytes": data_bytes,
            "file_bytes": file_bytes,
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3),
            "other_cores": round(max(0.0, busy - cpu) / wall, 2),
            "mib_s": round(data_bytes / MiB / wall, 2),
            "records_s": round(n_records / wall),
            "mib_per_cpu_s": round(data_bytes / MiB / cpu, 2) if cpu else None,
        }
        if mode == "decode" and not args.key_scan:
            break
    out["gets"] = counters.get(GET)
    out["vm_hwm_mib"] = round(status_kib("VmHWM") / 1024, 1)
    store.close()
    meta.close()
    return out


def run_child(kind: str, root: Path, extra: list[str], profile_to: Path | None = None) -> dict[str, Any]:
    cmd = [PYTHON, str(Path(__file__).resolve()), "--child", kind, "--root", str(root), *extra]
    if profile_to is not None:
        cmd = [str(PY_SPY), "record", "--format", "raw", "-r", "250", "-o", str(profile_to), "--", *cmd]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"child {kind} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# --- py-spy summaries -------------------------------------------------------------------------------------
def summarize_folded(path: Path, top: int = 20) -> dict[str, Any]:
    """Self and inclusive sample shares per function (lines merged), from py-spy's raw output."""
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    own_lines: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        frames = stack.split(";")
        if not any("run_jobs" in f for f in frames):
            continue  # only the job, not imports or setup
        total += n
        merged = [re.sub(r":\d+\)$", ")", f) for f in frames]
        own[merged[-1]] += n
        own_lines[frames[-1]] += n
        for frame in set(merged):
            incl[frame] += n

    def share(c: Counter[str]) -> list[tuple[str, float]]:
        return [(f, round(100 * n / total, 1)) for f, n in c.most_common(top)] if total else []

    return {"samples": total, "self": share(own), "self_lines": share(own_lines), "inclusive": share(incl)}


# --- scenario: throughput ---------------------------------------------------------------------------------
def throughput_spec(args: argparse.Namespace, value_bytes: int) -> DatasetSpec:
    keys = args.keys_1k if value_bytes >= 512 else args.keys_small
    return DatasetSpec(
        name=f"v{value_bytes}",
        partitions=args.partitions,
        keys=keys,
        updates=args.updates,
        value_bytes=value_bytes,
        batch_records=args.batch_records,
        file_bytes=args.file_mib * MiB,
    )


def scenario_throughput(args: argparse.Namespace, workdir: Path, stamp: str) -> list[dict[str, Any]]:
    out = []
    for value_bytes in args.value_sizes:
        spec = throughput_spec(args, value_bytes)
        pristine = workdir / f"{spec.name}-pristine"
        log(f"throughput {spec.name}: generating {spec.expected_records:,} records ({spec.keys:,} keys)")
        dataset = generate(spec, pristine)
        log(
            f"  {dataset['files']} files, {dataset['data_bytes'] / MiB:.1f} MiB of chunks in "
            f"{dataset['generate_s']} s"
        )
        runs = []
        for rep in range(args.repeat):
            scan = run_child("scan", pristine, ["--key-scan"] if rep == 0 else [])
            decoded = scan["decode"]
            floor = scan["floor"]
            log(f"  rep {rep}: physical floor {floor['mib_s']} MiB/s {floor['records_s']:,} rec/s")
            log(
                f"  rep {rep}: raw scan {decoded['mib_s']} MiB/s {decoded['records_s']:,} rec/s "
                f"(cpu {decoded['cpu_s']} s / wall {decoded['wall_s']} s, "
                f"other cores {decoded['other_cores']})"
            )
            work = workdir / f"{spec.name}-run"
            clone(pristine, work)
            compact = run_child("compact", work, ["--map-mib", str(args.map_mib)])
            summary = summarize_compaction(compact)
            log(
                f"  rep {rep}: compaction {summary['mib_s']} MiB/s {summary['records_s']:,} rec/s "
                f"(cpu {compact['cpu_s']} s / wall {compact['wall_s']} s, "
                f"other cores {compact['other_cores']}); "
                f"{summary['gets']} GETs / {summary['input_files']} files, {summary['puts']} PUTs / "
                f"{summary['output_files']} outputs"
            )
            runs.append({"scan": scan, "compact": compact, "summary": summary})
        verify = verify_output(spec, workdir / f"{spec.name}-run")
        log(f"  verify: {verify}")
        profile = None
        if args.profile:
            work = workdir / f"{spec.name}-prof"
            clone(pristine, work)
            folded = RESULTS_DIR / f"compaction-{stamp}-{spec.name}.folded"
            prof_run = run_child("compact", work, ["--map-mib", str(args.map_mib)], profile_to=folded)
            profile = {
                "folded": str(folded.relative_to(ROOT)),
                "wall_s": prof_run["wall_s"],
                "phases": prof_run["phases"][:50],
                **summarize_folded(folded),
            }
            shutil.rmtree(work, ignore_errors=True)
        out.append(
            {
                "value_bytes": value_bytes,
                "dataset": dataset,
                "runs": runs,
                "best": best_of(runs),
                "verify": verify,
                "profile": profile,
            }
        )
        shutil.rmtree(pristine, ignore_errors=True)
        shutil.rmtree(workdir / f"{spec.name}-run", ignore_errors=True)
    return out


def summarize_compaction(compact: dict[str, Any]) -> dict[str, Any]:
    jobs = [j for r in compact["rounds"] for j in r["jobs"]]
    wall = sum(r["jobs_s"] for r in compact["rounds"])
    data_in = sum(j["pass2_bytes"] for j in jobs)
    records_in = sum(j["records_in"] for j in jobs)
    gets = sum(j["gets"] for j in jobs)
    puts = sum(j["puts"] for j in jobs)
    inputs = sum(j["input_files"] for j in jobs)
    outputs = sum(j["output_files"] for j in jobs)
    return {
        "jobs": len(jobs),
        "outcomes": [j["outcome"] for j in jobs],
        "job_wall_s": round(wall, 3),
        "pass1_s": round(sum(j["pass1_seconds"] for j in jobs), 3),
        "pass2_s": round(sum(j["pass2_seconds"] for j in jobs), 3),
        "data_in_bytes": data_in,
        "bytes_read": sum(j["bytes_read"] for j in jobs),
        "bytes_written": sum(j["bytes_written"] for j in jobs),
        "records_in": records_in,
        "records_out": sum(j["records_out"] for j in jobs),
        "mib_s": round(data_in / MiB / wall, 2) if wall else None,
        "records_s": round(records_in / wall) if wall else None,
        # Per CPU second of the worker process (planning included): less sensitive to other load.
        "cpu_s": compact["cpu_s"],
        "mib_per_cpu_s": round(data_in / MiB / compact["cpu_s"], 2) if compact["cpu_s"] else None,
        "other_cores": compact["other_cores"],
        "gets": gets,
        "puts": puts,
        "input_files": inputs,
        "output_files": outputs,
        "gets_per_input_file": round(gets / inputs, 3) if inputs else None,
        "puts_per_output_file": round(puts / outputs, 3) if outputs else None,
        "partial_partitions": sum(j["partial_partitions"] for j in jobs),
        "map_utilization": max((j["map_utilization"] for j in jobs), default=0.0),
    }


def best_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The fastest raw scan and compaction (the least disturbed by other load), and the per-rep ratios."""
    scan = max(runs, key=lambda r: r["scan"]["decode"]["mib_s"])["scan"]["decode"]
    floor = max(runs, key=lambda r: r["scan"]["floor"]["mib_s"])["scan"]["floor"]
    compact = max(runs, key=lambda r: r["summary"]["mib_s"])["summary"]
    key_scans = [r["scan"]["scan_batch"] for r in runs if "scan_batch" in r["scan"]]
    ratios = [r["summary"]["mib_s"] / r["scan"]["decode"]["mib_s"] for r in runs]
    cpu_ratios = [r["summary"]["mib_per_cpu_s"] / r["scan"]["decode"]["mib_per_cpu_s"] for r in runs]
    return {
        "floor_mib_s": floor["mib_s"],
        "floor_records_s": floor["records_s"],
        "floor_ratio_best": round(compact["mib_s"] / floor["mib_s"], 3),
        "scan_mib_s": scan["mib_s"],
        "scan_records_s": scan["records_s"],
        "key_scan_mib_s": key_scans[0]["mib_s"] if key_scans else None,
        "key_scan_records_s": key_scans[0]["records_s"] if key_scans else None,
        "compact_mib_s": compact["mib_s"],
        "compact_records_s": compact["records_s"],
        "ratio_best": round(compact["mib_s"] / scan["mib_s"], 3),
        "ratio_per_rep": [round(x, 3) for x in ratios],
        "ratio_median": round(float(np.median(ratios)), 3),
        "cpu_ratio_median": round(float(np.median(cpu_ratios)), 3),
        "cpu_ratio_per_rep": [round(x, 3) for x in cpu_ratios],
        "scan_mib_per_cpu_s": max(r["scan"]["decode"]["mib_per_cpu_s"] for r in runs),
        "compact_mib_per_cpu_s": max(r["summary"]["mib_per_cpu_s"] for r in runs),
    }


# --- scenario: memory -------------------------------------------------------------------------------------
def scenario_memory(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    spec = DatasetSpec(
        name="mem",
        partitions=1,
        keys=args.mem_keys,
        updates=2 if args.mem_update_every else 1,
        value_bytes=args.mem_value_bytes,
        batch_records=args.batch_records,
        file_bytes=args.file_mib * MiB,
        update_every=max(1, args.mem_update_every),
    )
    root = workdir / "mem"
    log(f"memory: generating {spec.expected_records:,} records ({spec.keys:,} keys, 1 partition)")
    dataset = generate(spec, root)
    log(f"  {dataset['files']} files, {dataset['data_bytes'] / MiB:.1f} MiB in {dataset['generate_s']} s")
    compact = run_child(
        "compact", root, ["--map-mib", str(args.map_mib), "--max-rounds", str(args.mem_max_rounds)]
    )
    summary = summarize_compaction(compact)
    log(
        f"  {len(compact['rounds'])} round(s), peak RSS {compact['vm_hwm_mib']} MiB, map max size "
        f"{compact['map_max_size']:,} / capacity {compact['map_capacity']:,}; wall {compact['wall_s']} s"
    )
    verify = verify_output(spec, root)
    log(f"  verify: {verify}")
    map_mib = compact["map_memory_bytes"] / MiB
    result = {
        "dataset": dataset,
        "compact": compact,
        "summary": summary,
        "verify": verify,
        "bytes_per_key": round(compact["map_memory_bytes"] / spec.keys, 2),
        "bytes_per_slot": round(compact["map_memory_bytes"] / compact["map_slots"], 2),
        "map_mib": round(map_mib, 2),
        "rss_limit_mib": round(map_mib + TARGET_RSS_HEADROOM_MIB, 1),
        "rounds_to_converge": len(compact["rounds"]),
    }
    shutil.rmtree(root, ignore_errors=True)
    return result


# --- scenario: dedup lag ----------------------------------------------------------------------------------
def scenario_lag(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    import httpx

    data_dir = workdir / "lag"
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server_log = data_dir / "server.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for name in list(env):
        if name.startswith("STRATA_"):
            env.pop(name)  # embedded defaults only
    with server_log.open("wb") as logf:
        server = subprocess.Popen(
            [
                str(STRATA),
                "serve",
                "--data-dir",
                str(data_dir / "data"),
                "--port",
                str(port),
                "--kafka-port",
                "-1",
            ],
            stdout=logf,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=env,
        )
        try:
            return _run_lag(args, base, server, server_log, httpx)
        finally:
            if server.poll() is None:
                server.send_signal(signal.SIGTERM)
                try:
                    server.wait(20)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait(20)


def _run_lag(
    args: argparse.Namespace, base: str, server: subprocess.Popen[bytes], server_log: Path, httpx: Any
) -> dict[str, Any]:
    client = httpx.Client(base_url=base, timeout=30.0)
    deadline = time.monotonic() + 60
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"strata serve exited: {server_log.read_text()[-2000:]}")
        try:
            if client.get("/healthz").status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("strata serve did not start")
        time.sleep(0.1)
    topic = "lag"
    configs: dict[str, Any] = {"cleanup.policy": "compact"}
    if args.lag_max_compaction_lag_ms is not None:
        configs["max.compaction.lag.ms"] = args.lag_max_compaction_lag_ms
    r = client.post("/v1/topics", json={"name": topic, "partitions": args.lag_partitions, "configs": configs})
    r.raise_for_status()
    acks: list[tuple[int, int, int, float]] = []  # (key, partition, offset, ack time)
    # Optional cold keys, written once before the measurement: a live, clean part of the log that the
    # dirty ratio (min.cleanable.dirty.ratio) is measured against, as in a large table with a few hot keys.
    # Their acks count (as key COLD_KEY + k, before the start) so that an overwrite of one has a record to
    # replace.
    cold_value = "c" * args.lag_preload_value_bytes
    preload_start = time.monotonic()
    for first in range(0, args.lag_preload_keys, 500):
        batch = range(first, min(args.lag_preload_keys, first + 500))
        r = client.post(
            f"/v1/topics/{topic}/records",
            json={"records": [{"key": f"cold-{k:07d}", "value": cold_value} for k in batch]},
        )
        r.raise_for_status()
        t_ack = time.monotonic() - preload_start
        for k, o in zip(batch, r.json()["offsets"], strict=True):
            acks.append((COLD_KEY + k, o["partition"], o["offset"], t_ack))

    lock = threading.Lock()
    stop = threading.Event()
    value_pad = "x" * args.lag_value_bytes
    requests_per_cycle = max(1, args.lag_keys // args.lag_batch)
    gap = args.lag_update_s / requests_per_cycle
    errors: list[str] = []
    t_start = time.monotonic()
    acks[:] = [(k, p, o, t - (t_start - preload_start)) for k, p, o, t in acks]  # negative: before the start

    def produce(lane: int) -> None:
        # Request i (keys (i % per_cycle) * batch ...) is due at t_start + i * gap; lane j sends the i with
        # i % lanes == j, so a slow ack (up to a flush interval) does not hold back the other requests.
        pclient = httpx.Client(base_url=base, timeout=30.0)
        i = lane
        while not stop.is_set():
            stop.wait(max(0.0, t_start + i * gap - time.monotonic()))
            if stop.is_set():
                break
            first = (i % requests_per_cycle) * args.lag_batch
            ks = list(range(first, min(args.lag_keys, first + args.lag_batch)))
            body = {
                "records": [
                    {"key": f"key-{k:05d}", "value": f"{k}:{i}:{value_pad}"[: args.lag_value_bytes]}
                    for k in ks
                ]
            }
            try:
                resp = pclient.post(f"/v1/topics/{topic}/records", json=body)
                t_ack = time.monotonic() - t_start
                if resp.status_code == 200:
                    offs = resp.json()["offsets"]
                    with lock:
                        for k, o in zip(ks, offs, strict=True):
                            acks.append((k, o["partition"], o["offset"], t_ack))
                else:
                    errors.append(f"{resp.status_code} {resp.text[:200]}")
            except httpx.HTTPError as exc:
                errors.append(repr(exc))
            i += args.lag_producers
        pclient.close()

    def overwrite_cold() -> None:
        # Cold keys overwritten once each, evenly over the window in which lags are measured.
        count = min(args.lag_cold_overwrites, args.lag_preload_keys)
        if not count:
            return
        cclient = httpx.Client(base_url=base, timeout=30.0)
        chosen = random.Random(args.seed).sample(range(args.lag_preload_keys), count)
        first_s = args.lag_warmup_s
        span = max(0.0, args.lag_duration - args.lag_horizon_s - first_s)
        for n, k in enumerate(chosen):
            stop.wait(max(0.0, t_start + first_s + span * n / count - time.monotonic()))
            if stop.is_set():
                break
            try:
                resp = cclient.post(
                    f"/v1/topics/{topic}/records",
                    json={"records": [{"key": f"cold-{k:07d}", "value": "r" * args.lag_preload_value_bytes}]},
                )
                t_ack = time.monotonic() - t_start
                if resp.status_code == 200:
                    (o,) = resp.json()["offsets"]
                    with lock:
                        acks.append((COLD_KEY + k, o["partition"], o["offset"], t_ack))
                else:
                    errors.append(f"{resp.status_code} {resp.text[:200]}")
            except httpx.HTTPError as exc:
                errors.append(repr(exc))
        cclient.close()

    producers = [threading.Thread(target=produce, args=(j,), daemon=True) for j in range(args.lag_producers)]
    producers.append(threading.Thread(target=overwrite_cold, daemon=True))
    for thread in producers:
        thread.start()
    polls: list[dict[str, Any]] = []
    latest_lost_checks = 0
    latest_lost: list[tuple[int, int, int, float]] = []
    next_poll = time.monotonic()
    while time.monotonic() - t_start < args.lag_duration:
        stop.wait(max(0.0, next_poll - time.monotonic()))
        next_poll += args.lag_poll_s
        with lock:
            acked_before = list(acks)
        poll_start = time.monotonic() - t_start
        present: dict[int, set[int]] = {}
        fetched = 0
        for p in range(args.lag_partitions):
            offset, hw = 0, None
            seen: set[int] = set()
            while hw is None or offset < hw:
                resp = client.get(
                    f"/v1/topics/{topic}/partitions/{p}/records",
                    params={"offset": offset, "max_bytes": 8 * MiB, "max_wait_ms": 0},
                )
                resp.raise_for_status()
                body = resp.json()
                if hw is None:
                    hw = body["high_watermark"]
                seen.update(rec["offset"] for rec in body["records"])
                fetched += len(body["records"])
                if body["next_offset"] <= offset:
                    break
                offset = body["next_offset"]
            present[p] = seen
        poll_end = time.monotonic() - t_start
        # Invariant check: the latest value of every key acknowledged before this poll must be present.
        latest: dict[int, tuple[int, int, int, float]] = {}
        for a in acked_before:
            latest[a[0]] = a
        for k, p, o, t in latest.values():
            latest_lost_checks += 1
            if o not in present[p]:
                latest_lost.append((k, p, o, t))
        polls.append({"start": poll_start, "end": poll_end, "present": present, "records": fetched})
    stop.set()
    for thread in producers:
        thread.join(30)
    client.close()

    # Lag per overwritten record: ack of the overwrite -> end of the first later poll without the old one.
    by_key: dict[int, list[tuple[int, int, float]]] = {}
    for k, p, o, t in sorted(acks, key=lambda a: (a[0], a[2])):
        by_key.setdefault(k, []).append((p, o, t))
    end_s = polls[-1]["end"] if polls else 0.0
    window_lo, window_hi = args.lag_warmup_s, end_s - args.lag_horizon_s
    lags: list[float] = []
    lower: list[float] = []  # the last poll that still returned the old record: a lower bound of the lag
    censored: list[float] = []
    all_observed: list[float] = []
    cold_lags: list[float] = []
    cold_censored: list[float] = []
    for key, chain in by_key.items():
        for (p, o, _), (_, _, t_over) in itertools.pairwise(chain):
            gone_at = next(
                (pl["end"] for pl in polls if pl["start"] >= t_over and o not in pl["present"][p]), None
            )
            in_window = window_lo <= t_over <= window_hi
            if gone_at is None:
                if in_window:
                    censored.append(end_s - t_over)
                    if key >= COLD_KEY:
                        cold_censored.append(end_s - t_over)
                continue
            all_observed.append(gone_at - t_over)
            if in_window:
                lags.append(gone_at - t_over)
                if key >= COLD_KEY:
                    cold_lags.append(gone_at - t_over)
                still = [pl["end"] for pl in polls if pl["end"] < gone_at and o in pl["present"][p]]
                lower.append(max(0.0, (still[-1] if still else t_over) - t_over))
    log_text = server_log.read_text(errors="replace")
    jobs = re.findall(
        r"job (\d+) \((\w+)\) ([a-z]+)[^:]*: (\d+) file\(s\) in, (\d+) out;"
        r".*?pass 1 ([\d.]+) s.*?pass 2 ([\d.]+) s.*?(\d+) GET\(s\), (\d+) PUT\(s\)",
        log_text,
    )
    planned = re.findall(r"planned job \d+ \((\w+), (\d+) file\(s\) -> L(\d)\): (.*)", log_text)
    reasons = Counter(
        f"{kind} -> L{level}: " + re.sub(r"[\d.]+", "N", reason.split(": ", 1)[-1])
        for kind, _, level, reason in planned
    )
    combined = sorted(lags) + [float("inf")] * len(censored)

    def quantile(q: float) -> float | None:
        value = percentile(combined, q)
        return None if value is None or value == float("inf") else round(value, 2)

    p99_lower_bound = quantile(0.99) is None and bool(censored)
    cold_combined = sorted(cold_lags) + [float("inf")] * len(cold_censored)

    def cold_quantile(q: float) -> float | None:
        value = percentile(cold_combined, q)
        return None if value is None or value == float("inf") else round(value, 2)

    return {
        "preload_keys": args.lag_preload_keys,
        "max_compaction_lag_ms": args.lag_max_compaction_lag_ms,
        "cold": {
            "overwrites_in_window": len(cold_combined),
            "removed_in_window": len(cold_lags),
            "not_removed_in_window": len(cold_censored),
            "not_removed_min_age_s": round(min(cold_censored), 1) if cold_censored else None,
            "lag_p50_s": cold_quantile(0.50),
            "lag_p99_s": cold_quantile(0.99),
            "lag_max_s": round(max(cold_lags), 2) if cold_lags else None,
        },
        "hot_keys": args.lag_keys,
        "value_bytes": args.lag_value_bytes,
        "duration_s": round(end_s, 1),
        "produced_records": len(acks),
        "produce_errors": len(errors),
        "produce_error_sample": errors[:3],
        "polls": len(polls),
        "poll_seconds_mean": round(float(np.mean([pl["end"] - pl["start"] for pl in polls])), 3)
        if polls
        else None,
        "records_per_poll_last": polls[-1]["records"] if polls else None,
        "window_s": [round(window_lo, 1), round(window_hi, 1)],
        "overwrites_in_window": len(lags) + len(censored),
        "removed_in_window": len(lags),
        "not_removed_in_window": len(censored),
        "not_removed_min_age_s": round(min(censored), 1) if censored else None,
        # Percentiles over every overwrite in the window; one never removed counts as infinitely late,
        # so a percentile that lands on one is reported as None and "> not_removed_min_age_s".
        "lag_p50_s": quantile(0.50),
        "lag_p90_s": quantile(0.90),
        "lag_p99_s": quantile(0.99),
        "lag_p99_is_lower_bound": p99_lower_bound,
        "lag_max_s": round(max(lags), 2) if lags else None,
        "lag_lower_bound_p50_s": round(percentile(lower, 0.5) or 0, 2) if lower else None,
        "lag_lower_bound_max_s": round(max(lower), 2) if lower else None,
        "produce_rate_rec_s": round(len(acks) / end_s, 1) if end_s else None,
        "lag_all_observed_p50_s": round(percentile(all_observed, 0.5) or 0, 2) if all_observed else None,
        "lag_histogram_s": dict(Counter(int(x // 5 * 5) for x in lags).most_common()),
        "latest_checks": latest_lost_checks,
        "latest_lost": len(latest_lost),
        "latest_lost_sample": latest_lost[:5],
        "jobs_by_kind": dict(Counter(j[1] for j in jobs)),
        "jobs_by_outcome": dict(Counter(j[2] for j in jobs)),
        # As logged by the server's worker (JobStats): GETs per input file, PUTs per output file.
        "job_gets_per_input_file": [round(int(j[7]) / int(j[3]), 2) for j in jobs if int(j[3])],
        "job_puts_per_output_file": [round(int(j[8]) / int(j[4]), 2) for j in jobs if int(j[4])],
        "job_seconds_max": max((float(j[5]) + float(j[6]) for j in jobs), default=None),
        "plan_reasons": dict(reasons.most_common(10)),
        "server_log_tail": log_text.splitlines()[-5:],
    }


# --- report -----------------------------------------------------------------------------------------------
def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("pass" if ok else "MISS")


def print_report(results: dict[str, Any]) -> None:
    rows: list[tuple[str, str, str, str]] = []
    for t in results.get("throughput", []):
        b = t["best"]
        name = f"{t['value_bytes']} B values"
        rows.append(
            (
                f"{name}: physical floor (read + CRC-32C)",
                f"{b['floor_mib_s']} MiB/s, {b['floor_records_s']:,} rec/s",
                "-",
                "-",
            )
        )
        rows.append(
            (f"{name}: raw scan", f"{b['scan_mib_s']} MiB/s, {b['scan_records_s']:,} rec/s", "-", "-")
        )
        rows.append(
            (
                f"{name}: compaction",
                f"{b['compact_mib_s']} MiB/s, {b['compact_records_s']:,} rec/s",
                ">= 50% of raw",
                f"{verdict(b['ratio_median'] >= TARGET_RATIO)} (median {b['ratio_median']:.0%} of raw; reps "
                f"{b['ratio_per_rep']}; per CPU s {b['cpu_ratio_median']:.0%}; "
                f"best {b['floor_ratio_best']:.0%} of the floor)",
            )
        )
        wanted = TARGET_RECORDS_S.get(t["value_bytes"])
        if wanted is not None:
            rows.append(
                (
                    f"{name}: compaction records/s (best rep)",
                    f"{b['compact_records_s']:,}",
                    f">= {wanted:,}",
                    verdict(b["compact_records_s"] >= wanted),
                )
            )
        s = t["runs"][-1]["summary"]
        rows.append(
            (
                f"{name}: GETs per input file",
                f"{s['gets_per_input_file']} ({s['gets']}/{s['input_files']})",
                "2",
                verdict(s["gets_per_input_file"] == TARGET_GETS_PER_INPUT),
            )
        )
        rows.append(
            (
                f"{name}: PUTs per output file",
                f"{s['puts_per_output_file']} ({s['puts']}/{s['output_files']})",
                "1",
                verdict(s["puts_per_output_file"] == TARGET_PUTS_PER_OUTPUT),
            )
        )
        rows.append(
            (f"{name}: latest values lost", str(t["verify"]["latest_lost"]), "0", verdict(t["verify"]["ok"]))
        )
    m = results.get("memory")
    if m:
        c = m["compact"]
        rows.append(
            (
                "memory: keys in one pass",
                f"{c['map_max_size']:,} of {m['dataset']['keys']:,} (rounds {m['rounds_to_converge']})",
                ">= 5,000,000 in 1 pass",
                verdict(m["rounds_to_converge"] == 1 and c["map_max_size"] >= TARGET_KEYS),
            )
        )
        rows.append(
            (
                "memory: map bytes per entry (allocated / keys)",
                f"{m['bytes_per_slot']} ({m['bytes_per_key']})",
                "<= 24",
                verdict(m["bytes_per_slot"] <= TARGET_BYTES_PER_KEY),
            )
        )
        rows.append(
            (
                "memory: peak RSS",
                f"{c['vm_hwm_mib']} MiB",
                f"<= {m['rss_limit_mib']} MiB",
                verdict(c["vm_hwm_mib"] <= m["rss_limit_mib"]),
            )
        )
        rows.append(
            ("memory: latest values lost", str(m["verify"]["latest_lost"]), "0", verdict(m["verify"]["ok"]))
        )
    lag = results.get("lag")
    if lag:
        rows.append(
            (
                "dedup lag p50 / p99 / max",
                f"{lag['lag_p50_s']} / "
                + (
                    f"> {lag['not_removed_min_age_s']}"
                    if lag["lag_p99_is_lower_bound"]
                    else f"{lag['lag_p99_s']}"
                )
                + f" / {lag['lag_max_s']} s ({lag['not_removed_in_window']} of {lag['overwrites_in_window']} "
                "not removed)",
                "<= 60 s",
                verdict(
                    lag["lag_p99_s"] is not None
                    and lag["lag_p99_s"] <= TARGET_LAG_S
                    and not lag["not_removed_in_window"]
                ),
            )
        )
        cold = lag.get("cold") or {}
        if cold.get("overwrites_in_window"):
            bound_s = (lag.get("max_compaction_lag_ms") or 0) / 1000
            rows.append(
                (
                    "dedup lag, cold keys overwritten once: p50 / p99 / max",
                    f"{cold['lag_p50_s']} / {cold['lag_p99_s']} / {cold['lag_max_s']} s "
                    f"({cold['not_removed_in_window']} of {cold['overwrites_in_window']} not removed)",
                    f"<= max.compaction.lag.ms ({bound_s:g} s) + interval" if bound_s else "-",
                    verdict(not cold["not_removed_in_window"]),
                )
            )
        rows.append(
            ("dedup lag: latest values lost", str(lag["latest_lost"]), "0", verdict(lag["latest_lost"] == 0))
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)] if rows else [0] * 4
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenario", choices=("throughput", "memory", "lag", "all"), default="all")
    parser.add_argument("--workdir", default=None, help="scratch directory (default: a temporary one)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tag", default="", help="added to the results file name")
    parser.add_argument("--map-mib", type=int, default=128)
    parser.add_argument("--profile", action="store_true", help="one extra compaction per size under py-spy")
    # throughput
    parser.add_argument("--value-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1024, 100])
    parser.add_argument("--keys-1k", type=int, default=25_000, help="keys for values >= 512 B")
    parser.add_argument("--keys-small", type=int, default=300_000, help="keys for values < 512 B")
    parser.add_argument("--updates", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--batch-records", type=int, default=100, help="records per RecordBatch")
    parser.add_argument("--file-mib", type=int, default=8, help="L0 file size (the agent's flush_bytes)")
    parser.add_argument("--repeat", type=int, default=2)
    # memory
    parser.add_argument("--mem-keys", type=int, default=5_000_000)
    parser.add_argument("--mem-value-bytes", type=int, default=20)
    parser.add_argument("--mem-update-every", type=int, default=5, help="0: no second write of any key")
    parser.add_argument("--mem-max-rounds", type=int, default=5)
    # lag
    parser.add_argument("--lag-keys", type=int, default=200)
    parser.add_argument("--lag-batch", type=int, default=20, help="keys per produce request")
    parser.add_argument("--lag-update-s", type=float, default=2.0)
    parser.add_argument("--lag-value-bytes", type=int, default=100)
    parser.add_argument("--lag-partitions", type=int, default=4)
    parser.add_argument("--lag-producers", type=int, default=4, help="concurrent produce lanes")
    parser.add_argument("--lag-preload-keys", type=int, default=0, help="cold keys written once first")
    parser.add_argument("--lag-preload-value-bytes", type=int, default=1024)
    parser.add_argument("--lag-cold-overwrites", type=int, default=0, help="cold keys written once more")
    parser.add_argument(
        "--lag-max-compaction-lag-ms", type=int, default=None, help="the topic's max.compaction.lag.ms"
    )
    parser.add_argument("--lag-duration", type=float, default=150.0)
    parser.add_argument("--lag-poll-s", type=float, default=2.0)
    parser.add_argument("--lag-warmup-s", type=float, default=10.0)
    parser.add_argument("--lag-horizon-s", type=float, default=60.0)
    # children
    parser.add_argument("--child", choices=("compact", "scan"), help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--max-rounds", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--key-scan", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child == "compact":
        print(json.dumps(child_compact(args)))
        return 0
    if args.child == "scan":
        print(json.dumps(child_scan(args)))
        return 0
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results: dict[str, Any] = {
        "command": " ".join([Path(PYTHON).name, *sys.argv]),
        "started": stamp,
        "machine": machine_info(),
        "code": code_fingerprint(),
    }
    tmp = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="strata-compaction-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    scenarios = ("throughput", "memory", "lag") if args.scenario == "all" else (args.scenario,)
    try:
        for name in scenarios:
            started = time.perf_counter()
            before = loadavg()
            code_before = code_fingerprint()
            if name == "throughput":
                results["throughput"] = scenario_throughput(args, tmp, stamp)
            elif name == "memory":
                results["memory"] = scenario_memory(args, tmp)
            else:
                results["lag"] = scenario_lag(args, tmp)
            results.setdefault("scenario_meta", {})[name] = {
                "seconds": round(time.perf_counter() - started, 1),
                "loadavg_before": before,
                "loadavg_after": loadavg(),
                "code_before": code_before,
                "code_after": code_fingerprint(),
            }
            changed = [k for k, v in code_fingerprint().items() if code_before[k] != v]
            if changed and (name == "lag" or "compaction" in changed):
                log(
                    f"WARNING: the application code ({changed}) changed during the {name} scenario: re-run it"
                )
    finally:
        if not args.workdir:
            shutil.rmtree(tmp, ignore_errors=True)
        tag = f"-{args.tag}" if args.tag else ""
        path = RESULTS_DIR / f"compaction-{stamp}-{args.scenario}{tag}.json"
        path.write_text(json.dumps(results, indent=1, default=str))
        log(f"results: {path.relative_to(ROOT)}")
    print_report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
