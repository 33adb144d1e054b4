"""Compaction benchmark: throughput against a raw scan, offset-map memory, dedup lag, requests per file.

    python -m bench.compaction_bench --scenario throughput|memory|lag|all [--profile] [--figures] ...
    python -m bench.compaction_bench --scenario all --value-sizes 1024 --keys-1k 500 --updates 2 \\
        --partitions 2 --repeat 1 --mem-keys 5000 --lag-keys 20 --lag-batch 10 --lag-partitions 2 \\
        --lag-producers 2 --lag-duration 12 --lag-warmup-s 2 --lag-horizon-s 4 --lag-poll-s 1   # smoke run

Scenarios:

throughput
    For 1 KiB and 100-byte values (``--value-sizes``), write L0 files the way the agent's flusher does
    (bench/compaction_data.py) into a local directory bucket, without HTTP: a compacted topic of
    ``--partitions`` partitions, every key updated ``--updates`` times (rounds over all keys, each round in a
    fresh random order, so every file holds a slice of one or two rounds). Then, ``--repeat`` times, in
    fresh subprocesses (bench/compaction_child.py):
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
    A real ``strata serve`` (role all, embedded defaults) on a free 127.0.0.1 port (bench/compaction_lag.py).
    ``--lag-keys`` keys, each updated every ``--lag-update-s`` seconds (requests of ``--lag-batch`` keys,
    evenly spaced, sent by ``--lag-producers`` concurrent lanes because each ack waits for a flush),
    optionally after ``--lag-preload-keys`` cold keys written once, for ``--lag-duration`` seconds, while
    every partition is read from offset 0 every ``--lag-poll-s`` seconds. ``--lag-cold-overwrites`` of the
    cold keys are written once more, evenly spread over the measured window (an overwrite whose replaced
    record sits in the cleaned part, often in L2). ``--lag-max-compaction-lag-ms`` sets the topic's
    ``max.compaction.lag.ms`` (default: none, Kafka's default), the bound the planner must keep. Overwrites
    acked in the warm-up or too close to the end to observe a lag of ``--lag-horizon-s`` are left out. The
    figures are over every overwrite, and again for the cold keys alone (``cold``).

``--profile`` adds one compaction per value size under py-spy (``--format raw``, 250 Hz); the folded
stacks go to bench/results/ and the top functions into the JSON. Results: a table on stdout, JSON in
bench/results/ (ignored by git); with ``--figures``, the page's figures under bench/figures/.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import targets
from bench.compaction_lag import scenario_lag
from bench.compaction_scenarios import scenario_memory, scenario_throughput
from bench.harness import log
from bench.probes import code_fingerprint, loadavg
from bench.results import (
    Rows,
    add_output_args,
    markdown_table,
    page_figures,
    run_header,
    write_figures,
    write_results,
)

PACKAGES = {"compaction": ("planner", "storage"), "server": ("agents", "api", "strata")}


def size_label(value_bytes: int) -> str:
    return "1 KiB values" if value_bytes == 1024 else f"{value_bytes} B values"


def _throughput_rows(rows: Rows, t: dict[str, Any]) -> None:
    b, label = t["best"], size_label(t["value_bytes"])
    rows.add(
        f"physical floor (read + CRC-32C), {label}",
        f"{b['floor_mib_s']} MiB/s, {b['floor_records_s']:,} rec/s",
    )
    rows.add(f"raw scan, {label}", f"{b['scan_mib_s']} MiB/s, {b['scan_records_s']:,} rec/s")
    rows.add(
        f"compaction, {label} (best rep)", f"{b['compact_mib_s']} MiB/s, {b['compact_records_s']:,} rec/s"
    )
    ratio = 100 * b["ratio_median"]
    shown = f"{ratio:.0f} % (reps {b['ratio_per_rep']}; per CPU second {100 * b['cpu_ratio_median']:.0f} %)"
    rows.add(
        f"compaction / raw scan, {label} (median)",
        shown,
        "",
        targets.COMPACTION_RATIO,
        measured=ratio,
        area="compaction",
    )
    rows.add(
        f"compaction / physical floor, {label} (best rep)",
        f"{100 * b['floor_ratio_best']:.0f} %",
        area="compaction",
    )
    bar = targets.COMPACTION_RECORDS_S.get(t["value_bytes"])
    rec = b["compact_records_s"]
    rows.add(
        f"compaction records/s of input, {label} (best rep)",
        f"{rec:,}",
        "",
        bar,
        measured=rec,
        area="compaction",
    )
    s = t["runs"][-1]["summary"]
    gets = f"{s['gets_per_input_file']} ({s['gets']} / {s['input_files']})"
    measured = s["gets_per_input_file"]
    rows.add(
        f"GETs per input file, {label}",
        gets,
        "",
        targets.GETS_PER_INPUT_FILE,
        measured=measured,
        area="compaction",
    )
    puts = f"{s['puts_per_output_file']} ({s['puts']} / {s['output_files']})"
    measured = s["puts_per_output_file"]
    rows.add(
        f"PUTs per output file, {label}",
        puts,
        "",
        targets.PUTS_PER_OUTPUT_FILE,
        measured=measured,
        area="compaction",
    )
    lost = t["verify"]["latest_lost"]
    rows.add(
        f"latest values lost, {label}",
        lost,
        "",
        targets.LATEST_VALUES_LOST,
        ok=t["verify"]["ok"],
        area="compaction",
    )


def _memory_rows(rows: Rows, m: dict[str, Any]) -> None:
    c, keys = m["compact"], m["dataset"]["keys"]
    map_mib = round(m["map_mib"])
    one_pass = m["rounds_to_converge"] == 1 and targets.KEYS_IN_ONE_PASS.ok(c["map_max_size"])
    value = f"{c['map_max_size']:,} of {keys:,} in {m['rounds_to_converge']} round(s)"
    name = f"keys deduplicated in one pass ({map_mib} MiB map)"
    rows.add(name, value, "", f"{targets.KEYS_IN_ONE_PASS} in 1 pass", ok=one_pass, area="compaction")
    value = f"{m['bytes_per_slot']} ({m['bytes_per_key']} per key)"
    bar = targets.MAP_BYTES_PER_ENTRY
    rows.add("offset map bytes per entry", value, "", bar, measured=m["bytes_per_slot"], area="compaction")
    bar = targets.worker_rss(m["map_mib"])
    name = f"compaction worker peak RSS, {keys / 1e6:g} M keys"
    rows.add(name, c["vm_hwm_mib"], "MiB", bar, area="memory")
    lost = m["verify"]["latest_lost"]
    rows.add(
        "latest values lost, memory scenario",
        lost,
        "",
        targets.LATEST_VALUES_LOST,
        ok=m["verify"]["ok"],
        area="compaction",
    )


def _lag_rows(rows: Rows, lag: dict[str, Any]) -> None:
    p99 = f"> {lag['not_removed_min_age_s']}" if lag["lag_p99_is_lower_bound"] else f"{lag['lag_p99_s']}"
    removed = f"{lag['not_removed_in_window']} of {lag['overwrites_in_window']} not removed"
    value = f"{lag['lag_p50_s']} / {p99} / {lag['lag_max_s']} s ({removed})"
    cold = f", {lag['preload_keys']:,} cold keys" if lag["preload_keys"] else ""
    name = f"dedup lag p50 / p99 / max ({lag['hot_keys']} keys every {lag['update_s']:g} s{cold})"
    ok = targets.DEDUP_LAG_S.ok(lag["lag_p99_s"]) and not lag["not_removed_in_window"]
    rows.add(name, value, "", targets.DEDUP_LAG_S, ok=ok, area="compaction")
    c = lag.get("cold") or {}
    if c.get("overwrites_in_window"):
        bound_s = (lag.get("max_compaction_lag_ms") or 0) / 1000
        removed = f"{c['not_removed_in_window']} of {c['overwrites_in_window']} not removed"
        value = f"{c['lag_p50_s']} / {c['lag_p99_s']} / {c['lag_max_s']} s ({removed})"
        bar = f"<= max.compaction.lag.ms ({bound_s:g} s) + interval" if bound_s else None
        rows.add(
            "dedup lag, cold keys overwritten once: p50 / p99 / max",
            value,
            "",
            bar,
            ok=not c["not_removed_in_window"],
        )
    lost = lag["latest_lost"]
    rows.add("latest values lost, lag scenario", lost, "", targets.LATEST_VALUES_LOST, area="compaction")


def evaluate(results: dict[str, Any]) -> list[dict[str, Any]]:
    rows = Rows()
    for t in results.get("throughput", []):
        _throughput_rows(rows, t)
    if results.get("memory"):
        _memory_rows(rows, results["memory"])
    if results.get("lag"):
        _lag_rows(rows, results["lag"])
    return rows.rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--scenario", choices=("throughput", "memory", "lag", "all"), default="all")
    add("--workdir", default=None, help="scratch directory (default: a temporary one)")
    add("--seed", type=int, default=1)
    add("--tag", default="", help="added to the results file name")
    add("--map-mib", type=int, default=128)
    add("--profile", action="store_true", help="one extra compaction per size under py-spy")
    # throughput
    add("--value-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1024, 100])
    add("--keys-1k", type=int, default=25_000, help="keys for values >= 512 B")
    add("--keys-small", type=int, default=300_000, help="keys for values < 512 B")
    add("--updates", type=int, default=10)
    add("--partitions", type=int, default=8)
    add("--batch-records", type=int, default=100, help="records per RecordBatch")
    add("--file-mib", type=int, default=8, help="L0 file size (the agent's flush_bytes)")
    add("--repeat", type=int, default=2)
    # memory
    add("--mem-keys", type=int, default=5_000_000)
    add("--mem-value-bytes", type=int, default=20)
    add("--mem-update-every", type=int, default=5, help="0: no second write of any key")
    add("--mem-max-rounds", type=int, default=5)
    # lag
    add("--lag-keys", type=int, default=200)
    add("--lag-batch", type=int, default=20, help="keys per produce request")
    add("--lag-update-s", type=float, default=2.0)
    add("--lag-value-bytes", type=int, default=100)
    add("--lag-partitions", type=int, default=4)
    add("--lag-producers", type=int, default=4, help="concurrent produce lanes")
    add("--lag-preload-keys", type=int, default=0, help="cold keys written once first")
    add("--lag-preload-value-bytes", type=int, default=1024)
    add("--lag-cold-overwrites", type=int, default=0, help="cold keys written once more")
    add("--lag-max-compaction-lag-ms", type=int, default=None, help="the topic's max.compaction.lag.ms")
    add("--lag-duration", type=float, default=150.0)
    add("--lag-poll-s", type=float, default=2.0)
    add("--lag-warmup-s", type=float, default=10.0)
    add("--lag-horizon-s", type=float, default=60.0)
    add_output_args(parser, "compaction_bench")
    return parser.parse_args(argv)


def fingerprints() -> dict[str, str]:
    """``compaction`` covers what the throughput and memory scenarios run; ``server`` what lag adds."""
    return {name: code_fingerprint(packages) for name, packages in PACKAGES.items()}


def run_scenario(name: str, args: argparse.Namespace, tmp: Path, results: dict[str, Any]) -> None:
    started, before, code_before = time.perf_counter(), loadavg(), fingerprints()
    if name == "throughput":
        results["throughput"] = scenario_throughput(args, tmp, results["run_id"])
    elif name == "memory":
        results["memory"] = scenario_memory(args, tmp)
    else:
        results["lag"] = scenario_lag(args, tmp)
    code_after = fingerprints()
    results.setdefault("scenario_meta", {})[name] = {
        "seconds": round(time.perf_counter() - started, 1),
        "loadavg_before": before,
        "loadavg_after": loadavg(),
        "code_before": code_before,
        "code_after": code_after,
    }
    changed = [k for k, v in code_after.items() if code_before[k] != v]
    if changed and (name == "lag" or "compaction" in changed):
        log(f"WARNING: the application code ({changed}) changed during the {name} scenario: re-run it")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    results = run_header("compaction_bench", argv, PACKAGES["compaction"] + PACKAGES["server"])
    results["code"] = fingerprints()
    tmp = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="strata-compaction-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    scenarios = ("throughput", "memory", "lag") if args.scenario == "all" else (args.scenario,)
    tag = f"-{args.scenario}" + (f"-{args.tag}" if args.tag else "")
    try:
        for name in scenarios:
            run_scenario(name, args, tmp, results)
    finally:
        if not args.workdir:
            shutil.rmtree(tmp, ignore_errors=True)
        write_results(results, args.out, tag)  # what was measured, even if a scenario failed
    results["targets"] = evaluate(results)
    log(f"results: {write_results(results, args.out, tag)}")
    print(markdown_table(results["targets"]))
    if args.figures:
        log(f"figures: {write_figures(results, page_figures(results['targets']), args.note)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
