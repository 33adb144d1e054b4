"""One compaction job, or the single-pass baselines, in a fresh process (bench.compaction_bench's child).

    python -m bench.compaction_child compact --root DIR [--map-mib 128] [--max-rounds 1] [--seed 1]
    python -m bench.compaction_child scan --root DIR [--key-scan] [--seed 1]

Prints one JSON line. A fresh process per measurement keeps one run's memory and caches out of the next,
and lets the process report its own peak RSS (VmHWM). Each measurement reports its CPU time next to its
wall time, and the cores other processes kept busy meanwhile ("other cores", from /proc/stat), so that a
figure disturbed by other load can be spotted and run again.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import crc32c

from bench.compaction_data import TOPIC
from bench.harness import ROOT, MiB, bench_env, module_cmd
from bench.probes import RssSampler, status_kib, system_busy_s
from bench.pyspy_top import folded, function_of, shares
from planner.config import RunnerConfig
from planner.offset_map import KeyHasher
from planner.round import CompactionRound, RoundConfig
from storage import fileformat, records
from storage.clock import SystemClock
from storage.metadata import open_metadata_store
from storage.objectstore import GET, RequestCounters, open_object_store
from storage.records.scan import scan_batch_reference


class PhaseTimer:
    """Timings and RSS around each pass and upload of a job: JobRun's phase hook."""

    def __init__(self, sampler: RssSampler) -> None:
        self.sampler = sampler
        self.phases: list[dict[str, Any]] = []

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter() - self.sampler.t0
        rss0 = status_kib("VmRSS")
        try:
            yield
        finally:
            t1 = time.perf_counter() - self.sampler.t0
            self.phases.append(
                {
                    "phase": name,
                    "start_s": round(t0, 3),
                    "seconds": round(t1 - t0, 3),
                    "rss_start_mib": round(rss0 / 1024, 1),
                    "rss_end_mib": round(status_kib("VmRSS") / 1024, 1),
                    "rss_peak_mib": round(max(self.sampler.peak_between(t0, t1), rss0) / 1024, 1),
                }
            )


def run_rounds(compactor: CompactionRound, max_rounds: int) -> list[dict[str, Any]]:
    """Plan (forced) and run rounds until one cleans every partition fully, at most ``max_rounds``."""
    rounds = []
    for round_no in range(max_rounds):
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
    return rounds


def child_compact(args: argparse.Namespace) -> dict[str, Any]:
    """The real ``CompactionRound`` on the dataset at ``--root``, with its map's sizes and the RSS."""
    root = Path(args.root)
    sampler = RssSampler(interval=0.02).start()
    timer = PhaseTimer(sampler)
    rss_imports = status_kib("VmRSS")
    counters = RequestCounters()
    store = open_object_store(f"file://{root / 'bucket'}", counters=counters)
    meta = open_metadata_store(f"sqlite:///{root / 'metadata.db'}")
    inputs = meta.live_files()
    config = RoundConfig(runner=RunnerConfig(map_bytes=args.map_mib * MiB))
    compactor = CompactionRound(store, meta, SystemClock(), random.Random(args.seed), "bench-worker", config)
    compactor.runner.on_phase = timer  # instrumentation only
    offset_map = compactor.runner.offset_map
    map_sizes: list[int] = []
    original_clear = offset_map.clear

    def clear() -> None:
        map_sizes.append(offset_map.size)
        original_clear()

    offset_map.clear = clear  # type: ignore[method-assign]
    rss_setup = status_kib("VmRSS")
    busy0, cpu0, wall0 = system_busy_s(), time.process_time(), time.perf_counter()
    rounds = run_rounds(compactor, args.max_rounds)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    busy = system_busy_s() - busy0
    sampler.stop()
    store.close()
    meta.close()
    return {
        "input_files": len(inputs),
        "input_file_bytes": sum(f.size for f in inputs),
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
        "phases": timer.phases[:200],
    }


def scan_files(mode: str, store: Any, files: list[Any], hasher: KeyHasher) -> tuple[int, int, int]:
    """One baseline over every file: (records, chunk bytes, file bytes)."""
    n_records = data_bytes = file_bytes = 0
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
            keys: list[bytes] = []
            if mode == "decode":
                keys = [r.key for r in records.decode_records(chunk, verify_crc=False) if r.key is not None]
                n_records += cm.record_count
            else:
                for header, batch in records.iter_batches(chunk, verify_crc=False):
                    spans = scan_batch_reference(bytes(batch), header)
                    keys.extend(s.key for s in spans if s.key is not None)
                    n_records += len(spans)
            hasher.hash_many(keys)
    return n_records, data_bytes, file_bytes


def child_scan(args: argparse.Namespace) -> dict[str, Any]:
    """The single-pass baselines: read every file once and CRC it (the physical floor), or read every file
    once, decode every record and hash every key (the raw scan); with --key-scan also the Python reference
    of what each compaction pass reads per record (values skipped)."""
    root = Path(args.root)
    counters = RequestCounters()
    store = open_object_store(f"file://{root / 'bucket'}", counters=counters)
    meta = open_metadata_store(f"sqlite:///{root / 'metadata.db'}")
    files = meta.live_files()
    hasher = KeyHasher.random(random.Random(args.seed))
    out: dict[str, Any] = {"files": len(files)}
    for mode in ("floor", "decode", "scan_batch") if args.key_scan else ("floor", "decode"):
        busy0, cpu0, wall0 = system_busy_s(), time.process_time(), time.perf_counter()
        n_records, data_bytes, file_bytes = scan_files(mode, store, files, hasher)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
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
    out["gets"] = counters.get(GET)
    out["vm_hwm_mib"] = round(status_kib("VmHWM") / 1024, 1)
    store.close()
    meta.close()
    return out


def run_child(kind: str, root: Path, extra: list[str], profile_to: Path | None = None) -> dict[str, Any]:
    """``python -m bench.compaction_child KIND --root ROOT ...`` (under py-spy with ``profile_to``)."""
    cmd = module_cmd("bench.compaction_child", kind, "--root", str(root), *extra)
    if profile_to is not None:
        py_spy = str(Path(sys.executable).with_name("py-spy"))
        cmd = [py_spy, "record", "--format", "raw", "-r", "250", "-o", str(profile_to), "--", *cmd]
    proc = subprocess.run(cmd, cwd=ROOT, env=bench_env(), capture_output=True, text=True, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"child {kind} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def summarize_folded(path: Path, top: int = 20) -> dict[str, Any]:
    """Self and inclusive sample shares per function (lines merged), from py-spy's raw output."""
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    own_lines: Counter[str] = Counter()
    total = 0
    for frames, n in folded(path):
        if not any("run_jobs" in f for f in frames):
            continue  # only the job, not imports or setup
        total += n
        merged = [function_of(f) for f in frames]
        own[merged[-1]] += n
        own_lines[frames[-1]] += n
        for frame in set(merged):
            incl[frame] += n

    def share(c: Counter[str]) -> list[tuple[str, float]]:
        return shares(c, total, top)

    return {"samples": total, "self": share(own), "self_lines": share(own_lines), "inclusive": share(incl)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("kind", choices=("compact", "scan"))
    parser.add_argument("--root", required=True, help="the dataset: bucket/ and metadata.db")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--map-mib", type=int, default=128)
    parser.add_argument("--max-rounds", type=int, default=1)
    parser.add_argument("--key-scan", action="store_true", help="scan: also the reference key scan")
    args = parser.parse_args(argv)
    print(json.dumps(child_compact(args) if args.kind == "compact" else child_scan(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
