"""The throughput and memory scenarios of bench.compaction_bench, and the summaries of their jobs.

Every measurement runs in a fresh process (bench.compaction_child) on a dataset of bench.compaction_data;
a compaction runs on a hard-linked clone, so the pristine dataset serves every repetition.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from bench.compaction_child import run_child, summarize_folded
from bench.compaction_data import DatasetSpec, clone, generate, verify_output
from bench.harness import RESULTS_DIR, ROOT, MiB, log
from bench.targets import WORKER_RSS_HEADROOM_MIB


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


def one_rep(
    args: argparse.Namespace, spec: DatasetSpec, pristine: Path, workdir: Path, rep: int
) -> dict[str, Any]:
    """The baselines, then a compaction of a clone: one repetition."""
    scan = run_child("scan", pristine, ["--key-scan"] if rep == 0 else [])
    decoded, floor = scan["decode"], scan["floor"]
    log(f"  rep {rep}: physical floor {floor['mib_s']} MiB/s {floor['records_s']:,} rec/s")
    log(
        f"  rep {rep}: raw scan {decoded['mib_s']} MiB/s {decoded['records_s']:,} rec/s "
        f"(cpu {decoded['cpu_s']} s / wall {decoded['wall_s']} s, other cores {decoded['other_cores']})"
    )
    work = workdir / f"{spec.name}-run"
    clone(pristine, work)
    compact = run_child("compact", work, ["--map-mib", str(args.map_mib)])
    summary = summarize_compaction(compact)
    log(
        f"  rep {rep}: compaction {summary['mib_s']} MiB/s {summary['records_s']:,} rec/s "
        f"(cpu {compact['cpu_s']} s / wall {compact['wall_s']} s, other cores {compact['other_cores']}); "
        f"{summary['gets']} GETs / {summary['input_files']} files, {summary['puts']} PUTs / "
        f"{summary['output_files']} outputs"
    )
    return {"scan": scan, "compact": compact, "summary": summary}


def profile_one(
    args: argparse.Namespace, name: str, pristine: Path, workdir: Path, stamp: str
) -> dict[str, Any]:
    """One more compaction under py-spy: the folded stacks under bench/results/, the top functions."""
    work = workdir / f"{name}-prof"
    clone(pristine, work)
    folded = RESULTS_DIR / f"compaction-{stamp}-{name}.folded"
    prof_run = run_child("compact", work, ["--map-mib", str(args.map_mib)], profile_to=folded)
    shutil.rmtree(work, ignore_errors=True)
    return {
        "folded": str(folded.relative_to(ROOT)),
        "wall_s": prof_run["wall_s"],
        "phases": prof_run["phases"][:50],
        **summarize_folded(folded),
    }


def scenario_throughput(args: argparse.Namespace, workdir: Path, stamp: str) -> list[dict[str, Any]]:
    out = []
    for value_bytes in args.value_sizes:
        spec = throughput_spec(args, value_bytes)
        pristine = workdir / f"{spec.name}-pristine"
        log(f"throughput {spec.name}: generating {spec.expected_records:,} records ({spec.keys:,} keys)")
        dataset = generate(spec, pristine)
        mib = dataset["data_bytes"] / MiB
        log(f"  {dataset['files']} files, {mib:.1f} MiB of chunks in {dataset['generate_s']} s")
        runs = [one_rep(args, spec, pristine, workdir, rep) for rep in range(args.repeat)]
        verify = verify_output(spec, workdir / f"{spec.name}-run")
        log(f"  verify: {verify}")
        profile = profile_one(args, spec.name, pristine, workdir, stamp) if args.profile else None
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
        "rss_limit_mib": round(map_mib + WORKER_RSS_HEADROOM_MIB, 1),
        "rounds_to_converge": len(compact["rounds"]),
    }
    shutil.rmtree(root, ignore_errors=True)
    return result
