"""``python -m tests.eos``: the EOS workload and its checker against a running cluster, for longer runs.

    python -m tests.eos --bootstrap 127.0.0.1:9092 --seconds 300 --seed 7 [--processes 4] [--out DIR]
    python -m tests.eos --reference --seconds 60     # against a real Kafka broker started for the run
    python -m tests.eos --strata --seconds 120       # against a Strata agent on the embedded default

Prints the verdict and exits 1 when the history has an anomaly (2 when the workload itself failed). The
history stays in ``--out`` (default: a fresh folder under /tmp) so a failing run can be read again.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

from tests.eos.checker import check
from tests.eos.workload import WorkloadConfig, WorkloadError, run_workload


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.eos", description=__doc__.split("\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap", help="HOST:PORT[,HOST:PORT...] of the cluster under test")
    where.add_argument("--reference", action="store_true", help="start a real Kafka broker (Kafka's jars)")
    where.add_argument("--strata", action="store_true", help="start a Strata agent (embedded default)")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="strata-eos-"))
    broker = None
    stack = contextlib.ExitStack()
    if args.reference:
        from tests.fixtures.reference_broker import start_reference_broker

        broker = start_reference_broker()
        bootstrap = broker.bootstrap
    elif args.strata:
        from tests.fixtures.processes import agent_process, free_port

        kafka_port = free_port()
        stack.enter_context(
            agent_process(
                ["--role", "agent", "--data-dir", str(out / "agent"), "--kafka-port", str(kafka_port)], out
            )
        )
        bootstrap = f"127.0.0.1:{kafka_port}"
    else:
        bootstrap = args.bootstrap
    topic = f"eos-{args.seed}-{uuid.uuid4().hex[:8]}"
    cfg = WorkloadConfig(
        bootstrap,
        topic,
        partitions=args.partitions,
        processes=args.processes,
        seconds=args.seconds,
        seed=args.seed,
    )
    started = time.monotonic()
    try:
        history = run_workload(cfg, out)
    except WorkloadError as e:
        print(f"the workload failed (history in {out}):\n{e}", file=sys.stderr)
        return 2
    finally:
        if broker is not None:
            broker.stop()
        stack.close()
    verdict = check(history)
    (out / "verdict.json").write_text(
        json.dumps(
            {
                "valid": verdict.valid,
                "counts": verdict.counts,
                "stats": verdict.stats,
                "examples": verdict.examples,
            },
            indent=1,
        )
    )
    print(f"history: {out} ({time.monotonic() - started:.1f} s)")
    print(verdict.summary())
    return 0 if verdict.valid else 1


if __name__ == "__main__":
    sys.exit(main())
