"""How long a flush commit takes while another thread keeps the GIL busy, as an agent's event loop does.

    python -m bench.commit_contention [--partitions 32] [--commits 150] [--idempotent] [--switch-interval S]

The agent commits each flush in a worker thread (agents/flusher.py) while its event loop, in the main
thread, parses produce requests. Python's sqlite3 module gives up the GIL around every statement step
and has to win it back afterwards; while the main thread is running Python code, each win waits for the
main thread's switch interval (5 ms by default). So what a commit costs under load is about how many steps
it takes, not how long SQLite works. This runs ``commit_flush`` of one file with a chunk in each of
``--partitions`` partitions against a SQLite store in a temporary directory, from a second thread, once
with the main thread idle (sleeping) and once with it spinning in a Python loop, and prints the commit
time's mean, p50 and p90 for both. With ``--idempotent`` each chunk carries one idempotent producer's
batch, in sequence, so the commit checks and writes that producer's state in every partition too, as it
does under librdkafka's and Java's idempotent producers.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time

from storage.metadata import open_metadata_store
from storage.metadata.rows import NewChunk, NewFile, ProducerBatch

RECORDS = 100  # per chunk


def run(partitions: int, commits: int, busy: bool, idempotent: bool = False) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = open_metadata_store(f"sqlite:///{tmp}/meta.db")
        try:
            store.create_topic("t", partitions, {}, 0)
            times: list[float] = []
            done = threading.Event()

            def commit_all() -> None:
                try:
                    for i in range(commits):
                        chunks = [
                            NewChunk("t", p, RECORDS, p * 1000, 1000, 0, 1, 0) for p in range(partitions)
                        ]
                        # Producer 1 at epoch 0, one batch per partition, each following the last.
                        producers = [
                            ProducerBatch(p, p, 0, RECORDS, 1, 0, i * RECORDS) for p in range(partitions)
                        ]
                        started = time.perf_counter()
                        store.commit_flush(
                            NewFile(f"f{i}", 1000 * partitions, 0, 0),
                            chunks,
                            [],
                            0,
                            producers if idempotent else [],
                            10**9,
                        )
                        times.append(time.perf_counter() - started)
                finally:
                    done.set()

            worker = threading.Thread(target=commit_all)
            worker.start()
            spins = 0
            while not done.is_set():
                if busy:
                    spins += 1  # Python bytecode, holding the GIL as a busy event loop does
                else:
                    time.sleep(0.001)
            worker.join()
            return sorted(times)
        finally:
            store.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--commits", type=int, default=150)
    parser.add_argument("--idempotent", action="store_true", help="one producer's batch in every chunk")
    parser.add_argument("--switch-interval", type=float, default=None, help="sys.setswitchinterval, seconds")
    args = parser.parse_args()
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    interval_ms = sys.getswitchinterval() * 1000
    producers = ", an idempotent producer's batch in each" if args.idempotent else ""
    print(f"commit_flush of {args.partitions} chunks{producers}, SQLite, switch interval {interval_ms:g} ms")
    for busy in (False, True):
        times = run(args.partitions, args.commits, busy, args.idempotent)
        n = len(times)
        mean = 1000 * sum(times) / n
        p50, p90 = 1000 * times[n // 2], 1000 * times[int(n * 0.9)]
        main_thread = "busy" if busy else "idle"
        print(f"  main thread {main_thread}: mean {mean:.2f} ms, p50 {p50:.2f} ms, p90 {p90:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
