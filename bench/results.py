"""What a benchmark run writes: its full results, its table on stdout, and the page's figures.

Every main benchmark builds its figures as rows (``Rows``): a metric, its value and unit, its target and
whether it passed. The rows go into the run's JSON under bench/results/ (ignored by git: scratch) and,
printed as a Markdown table, to stdout. Rows tagged with an area of docs/benchmarks.md are the page's
figures: with ``--figures`` a run also writes them, with its command, date, commit and a machine note, to
bench/figures/<benchmark>-<run id>.json, which ``python -m bench.report`` renders into the page.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness import BENCH_DIR, RESULTS_DIR, ROOT, log
from bench.probes import code_fingerprint, git_commit, machine_info
from bench.targets import Target

FIGURES_DIR = BENCH_DIR / "figures"
# The areas of docs/benchmarks.md, in page order: each has one generated table.
AREAS = {
    "http-produce": "HTTP produce",
    "http-fetch": "HTTP fetch",
    "kafka": "Kafka door",
    "groups": "consumer groups",
    "compaction": "compaction",
    "spark": "Spark read",
    "transactions": "transactions",
    "lake": "topics as Iceberg tables",
    "memory": "memory",
    "round-trip": "the acknowledgement round trip",
}
# Areas whose benchmark has no recorded run yet: their table says "No figures recorded." until the first
# run on a quiet machine writes its figures file, which must then take the area off this set
# (tests/unit/test_benchmark_page.py holds both ways).
AWAITING_FIRST_RUN: frozenset[str] = frozenset()


class Rows:
    """A run's figures in order, each ``{"metric", "value", "unit", "target", "pass", "area"}``."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(
        self,
        metric: str,
        value: Any,
        unit: str = "",
        target: Target | str | None = None,
        *,
        measured: float | None = None,
        ok: bool | None = None,
        area: str | None = None,
    ) -> None:
        """One figure. With a ``Target``, pass or miss is ``target.ok(measured)`` (``measured`` defaults to
        ``value``, which may be rounded or a string); with a string target, ``ok`` says it."""
        if area is not None and area not in AREAS:
            raise ValueError(f"unknown area {area!r}")
        if isinstance(target, Target) and ok is None:
            ok = target.ok(measured if measured is not None else value)
        text = "-" if target is None else str(target)
        self.rows.append(
            {"metric": metric, "value": value, "unit": unit, "target": text, "pass": ok, "area": area}
        )


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("pass" if ok else "**miss**")


def shown(row: dict[str, Any]) -> str:
    if row["value"] is None:
        return "-"
    return f"{row['value']} {row['unit']}".rstrip()


def markdown_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| metric | value | target | result |", "| --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['metric']} | {shown(r)} | {r['target']} | {verdict(r['pass'])} |")
    return "\n".join(lines)


# --- the run ------------------------------------------------------------------------------------------------
def add_output_args(parser: argparse.ArgumentParser, benchmark: str) -> None:
    parser.add_argument(
        "--out", default=None, help=f"JSON results (default bench/results/{benchmark}-<time>.json)"
    )
    parser.add_argument(
        "--figures",
        action="store_true",
        help="also write the page's figures to bench/figures/ (then: python -m bench.report)",
    )
    parser.add_argument("--note", default="", help="a word on the machine for the page (a fast day, ...)")


def run_header(
    benchmark: str, argv: list[str], packages: tuple[str, ...], tree: Path = ROOT, **versions: str
) -> dict[str, Any]:
    """The head of a run's results: what ran, when, on what machine and code."""
    now = time.gmtime()
    return {
        "benchmark": benchmark,
        "run_id": time.strftime("%Y%m%d-%H%M%S", now),
        "date": time.strftime("%Y-%m-%d", now),
        "command": " ".join(["python", "-m", f"bench.{benchmark}", *argv]),
        "commit": git_commit(tree),
        "code_sha256": code_fingerprint(packages, tree),
        "machine": machine_info(**versions),
    }


def write_results(report: dict[str, Any], out: str | None, tag: str = "") -> Path:
    """The run's full results as JSON under bench/results/ (or ``out``)."""
    RESULTS_DIR.mkdir(exist_ok=True)
    path = Path(out) if out else RESULTS_DIR / f"{report['benchmark']}-{report['run_id']}{tag}.json"
    path.write_text(json.dumps(report, indent=1, default=str))
    return path


def finish_run(
    report: dict[str, Any],
    args: argparse.Namespace,
    print_report: Callable[[dict[str, Any]], None],
    figures: list[dict[str, Any]],
) -> None:
    """Write the results, print the report, with --figures write the page's figures; say where."""
    out = write_results(report, args.out)
    print_report(report)
    if args.figures:
        log(f"figures: {write_figures(report, figures, args.note)}")
    load, loop_s = report["machine"]["loadavg_at_start"], report["machine"].get("python_loop_10m_s")
    print(
        f"\nload average at start {load}; a 10M-addition Python loop {loop_s} s; took"
        f" {report.get('elapsed_s', '?')} s; {out}"
    )


def machine_note(machine: dict[str, Any], note: str) -> str:
    """A short description of the machine for the page: cores, CPU, load at start, and ``note``."""
    text = f"{machine['nproc']} vCPU {machine['cpu_model']}, load {machine['loadavg_at_start']} at start"
    if machine.get("python_loop_10m_s") is not None:  # runs before it was recorded lack it
        text += f", a 10M-addition Python loop in {machine['python_loop_10m_s']:.2f} s"
    return f"{text}; {note}" if note else text


def page_figures(rows: list[dict[str, Any]], suffix: str = "") -> list[dict[str, Any]]:
    """The rows tagged with an area, as the page shows them; ``suffix`` names the backend."""
    out = []
    for r in rows:
        if r["area"] is None:
            continue
        name = f"{r['metric']}, {suffix}" if suffix else r["metric"]
        out.append(
            {"area": r["area"], "figure": name, "value": shown(r), "target": r["target"], "pass": r["pass"]}
        )
    return out


BACKEND_LABELS = {"local": "local", "s3": "S3 (moto)"}


def backend_figures(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The page's figures of every backend of a run, each figure named with its backend."""
    return [
        f
        for backend, r in report["backends"].items()
        for f in page_figures(r.get("targets", []), BACKEND_LABELS[backend])
    ]


def write_figures(report: dict[str, Any], figures: list[dict[str, Any]], note: str) -> Path:
    """bench/figures/<benchmark>-<run id>.json: the page's figures of this run."""
    FIGURES_DIR.mkdir(exist_ok=True)
    path = FIGURES_DIR / f"{report['benchmark']}-{report['run_id']}.json"
    head = {k: report[k] for k in ("benchmark", "run_id", "date", "commit", "command")}
    head["machine"] = machine_note(report["machine"], note)
    path.write_text(json.dumps({**head, "figures": figures}, indent=1) + "\n")
    return path
