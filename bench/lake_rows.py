"""The lake benchmark's figures as rows (``bench.results.Rows``), from each phase's results: the page's
figures carry the ``lake`` area, the rest are printed and kept in the run's JSON only."""

from __future__ import annotations

from typing import Any

from bench.lake_analysis import rounded
from bench.lake_typed import RAW
from bench.results import Rows
from bench.targets import LAKE_KEEP_UP_RATIO, LAKE_MIB_PER_CPU_S, lake_lag_s, lake_writer_rss

AREA = "lake"
SHAPES = {
    "all": "writer in role all's worker process (--role all)",
    "thread": "writer in the agent's process (--role all --no-worker-process)",
    "split": "writer in its own process",
}


def _pair(a: Any, b: Any, digits: int = 1) -> str:
    return f"{rounded(a, digits)} / {rounded(b, digits)}"


def raw_rows(rows: Rows, raw: dict[str, Any]) -> None:
    for cap, r in raw.items():
        rate = r["produced"]["rate_mib_offered"]
        head = f"raw table, {rate:g} MiB/s offered, cap {cap} MiB per commit"
        rows.add(f"{head}: produce acknowledged", rounded(r["produced"]["mib_s"]), "MiB/s")
        committed = r["committed_mib_s"]
        rows.add(f"{head}: committed to the table", rounded(committed), "MiB/s", area=AREA)
        ratio = 100 * committed / r["produced"]["mib_s"] if committed and r["produced"]["mib_s"] else None
        rows.add(f"{head}: committed / produced", rounded(ratio), "%", LAKE_KEEP_UP_RATIO, area=AREA)
        rows.add(
            f"{head}: MiB committed per CPU second of the writer",
            rounded(r["mib_per_writer_cpu_s"]),
            "MiB",
            LAKE_MIB_PER_CPU_S,
            area=AREA,
        )
        lag = r["lag"]
        rows.add(f"{head}: lag in offsets, mean / largest", _pair(lag["records_mean"], lag["records_max"], 0))
        rows.add(
            f"{head}: lag in seconds, mean / largest",
            _pair(lag["s_mean"], lag["s_max"]),
            "s",
            lake_lag_s(r["interval_ms"]),
            measured=lag["s_max"],
            area=AREA,
        )
        cores = r["cpu_cores"]
        rows.add(f"{head}: writer / agent cores", _pair(cores.get("writer"), cores.get("agent"), 2))
        buffer = r.get("buffer_mib")
        rows.add(
            f"{head}: writer peak RSS, write buffer {buffer} MiB",
            r["writer_peak_rss_mib"],
            "MiB",
            None if buffer is None else lake_writer_rss(buffer),
            area=AREA,
        )
        if "writer_base_rss_mib" in r:
            rows.add(f"{head}: writer RSS before the load", r["writer_base_rss_mib"], "MiB")
        steady = r["steady"] or {}
        rows.add(
            f"{head}: commits measured (seen in all)", f"{steady.get('commits', 0)} ({r['commits_seen']})"
        )
        if steady:
            intervals = steady["commits"] - 1
            mib = steady["records"] * r["produced"]["record_bytes"] / 2**20
            rows.add(f"{head}: from one commit to the next", round(steady["seconds"] / intervals, 1), "s")
            rows.add(f"{head}: committed per commit", round(mib / intervals), "MiB")


def typed_rows(rows: Rows, typed: dict[str, Any]) -> None:
    for kind, t in typed.items():
        name = kind if kind == RAW else f"typed, {kind}"
        head = f"lake commit of {t['rows']:,} orders, {name}"
        rows.add(f"{head}: records/s", t["records_s"], "records/s", area=AREA)
        rows.add(f"{head}: records per CPU second", t["records_per_cpu_s"], "records")
        if kind != RAW:
            invalid = t["invalid_records"]
            rows.add(f"{head}: records without a typed row", invalid, target="= 0", ok=invalid == 0)
    if RAW in typed:
        rows.add(
            "objects written by one commit of a raw table (files created in a local warehouse)",
            typed[RAW]["files_described"],
            area=AREA,
        )
    for kind in (k for k in typed if k != RAW):
        rows.add(f"objects written by one commit of a typed table, {kind}", typed[kind]["files_described"])


def upsert_rows(rows: Rows, upsert: dict[str, Any]) -> None:
    for buckets, b in upsert.items():
        for s in b["fractions"].values():
            keys, changed = b["keys"], s["keys_per_commit"]
            head = f"state table of {keys:,} keys, {buckets} buckets, {changed:,} keys per commit"
            written = s["parquet_bytes_written_mean"] / 2**20
            touched = rounded(s["buckets_rewritten_mean"])
            rows.add(
                f"{head}: written per commit",
                f"{written:.2f} MiB, {s['rewritten_pct']} % of the table"
                f" ({touched} buckets; expected {s['expected_bucket_share_pct']} %)",
                area=AREA,
            )
            rows.add(
                f"{head}: objects written to the state table per commit",
                s["state_files_last_commit"],
                area=AREA if buckets == max(upsert, key=int) else None,
            )
            rows.add(f"{head}: lake round", s["wall_s_mean"], "s")


def flush_rows(rows: Rows, flush: dict[str, Any]) -> None:
    for shape, f in flush.items():
        head = f"{f['rate_mib']:g} MiB/s, {SHAPES[shape]}"
        off, on = f["off"], f["on"]
        pairs = (("ack p50 / p99", "ack"), ("flush mean / p99 (bucket bound)", "flush"))
        for label, key in pairs:
            low, high = ("p50", "p99") if key == "ack" else ("mean", "p99")
            for kind, window in (("off", off), ("on", on)):
                pair = _pair(window[f"{key}_{low}_ms"], window[f"{key}_{high}_ms"])
                rows.add(f"{head}: {label}, lake {kind}", pair, "ms", area=AREA)
        rows.add(
            f"{head}: flush metadata commit mean, lake off / on",
            _pair(off["commit_mean_ms"], on["commit_mean_ms"]),
            "ms",
            area=AREA,
        )
        rows.add(
            f"{head}: flush upload mean, lake off / on",
            _pair(off["upload_mean_ms"], on["upload_mean_ms"]),
            "ms",
        )
        rows.add(
            f"{head}: lake commits per window, off / on", _pair(off["lake_commits"], on["lake_commits"], 0)
        )
        rows.add(f"{head}: produce MiB/s, lake off / on", _pair(off["mib_s"], on["mib_s"]), "MiB/s")
        errors = sum(sum(w["errors"].values()) for w in f["windows"])
        rows.add(f"{head}: failed deliveries", errors, target="= 0", ok=errors == 0)
