"""One line per backend per run, from bench.produce_fetch's JSON results, to compare runs on a busy machine.

    python -m bench.summarize bench/results/produce_fetch-*.json

Columns: produce MiB/s, ceiling MiB/s, ratio, p50/p99 ms, agent CPU ms per MiB, other load (cores used by
processes the benchmark did not start), PUTs/flush, PUTs/s, idle PUTs, fetch MiB/s, overload peak RSS, 429s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def main() -> int:
    header = (
        "| run | backend | clients x rec | produce MiB/s | ceiling MiB/s | ratio % | p50 ms | p99 ms "
        "| agent CPU ms/MiB | other cores | PUT/flush | PUT/s | idle PUTs | fetch MiB/s | overload RSS MiB "
        "| 429s |"
    )
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for path in sys.argv[1:]:
        report = json.loads(Path(path).read_text())
        for backend, r in report["backends"].items():
            if "error" in r:
                print(f"| {report['run_id']} | {backend} | failed: {r['error'][:60]} |")
                continue
            p, b, f, o = r.get("produce"), r.get("bare"), r.get("fetch"), r.get("overload")
            cells = [report["run_id"], backend]
            if p and b:
                cores = p["cpu_cores"]
                other = cores.get("system", 0) - sum(v for k, v in cores.items() if k != "system")
                other -= p["loadgen_cpu_cores"]
                think = f", think {p['think_ms']:g} ms" if p.get("think_ms") else ""
                cells += [
                    f"{p['clients']} x {p['records_per_request']}{think}",
                    fmt(p["mib_s"]),
                    fmt(b["mib_s"]),
                    fmt(100 * p["mib_s"] / b["mib_s"] if b["mib_s"] else None),
                    fmt(p["latency_ms"]["p50"], 0),
                    fmt(p["latency_ms"]["p99"], 0),
                    fmt(1000 * cores["agent"] / p["mib_s"] if p["mib_s"] else None),
                    fmt(max(0.0, other), 2),
                    fmt(p["puts_per_flush"], 2),
                    fmt(p["puts_s"], 2),
                    fmt(p["idle_puts"], 0),
                    fmt(f["mib_s"] if f else None),
                ]
            else:
                cells += ["-"] * 12
            if o:
                cells += [fmt(max(o["peak_rss_sampled_mib"], o["vmhwm_mib"]), 0), fmt(o["http_429"])]
            else:
                cells += ["-", "-"]
            print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
