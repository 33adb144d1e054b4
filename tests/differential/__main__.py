"""``python -m tests.differential [scenario ...]``: start both brokers, run the scenarios, report."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.differential.runner import report, run
from tests.differential.wire import Side
from tests.fixtures.kafka import run_broker
from tests.fixtures.reference_broker import start_reference_broker
from tests.fixtures.server import local_settings


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.differential")
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--quiet", action="store_true", help="print only unexpected differences")
    args = parser.parse_args(argv)
    reference = start_reference_broker()
    print(f"reference broker started in {reference.started_in_s} s", file=sys.stderr)
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            run_broker(local_settings(Path(tmp), group_initial_rebalance_delay_ms=0)) as strata,
        ):
            outcomes = run(Side("kafka", reference.port), Side("strata", strata.port), args.scenarios or None)
    finally:
        reference.stop()
    print(report(outcomes))
    unexpected = sum(len(o.unexpected) for o in outcomes)
    print(f"{len(outcomes)} scenarios, {unexpected} unexpected differences")
    return 1 if unexpected else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
