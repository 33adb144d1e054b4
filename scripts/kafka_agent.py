"""A Strata agent with its Kafka listener, for scripts/librdkafka_suite.sh until `strata serve` grows one.

    python scripts/kafka_agent.py --data-dir DIR [--num-partitions N]

Listens on a free port, prints ``listening on 127.0.0.1:PORT`` on stdout once the listener accepts
connections, then serves until SIGTERM or SIGINT.
Embedded backend (SQLite metadata, local object store) under DIR.
"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

from broker.config import BrokerConfig
from tests.fixtures.kafka import run_broker
from tests.fixtures.server import local_settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument(
        "--num-partitions", type=int, default=BrokerConfig().num_partitions, help="for auto-created topics"
    )
    args = parser.parse_args()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with run_broker(
        local_settings(args.data_dir), BrokerConfig(num_partitions=args.num_partitions)
    ) as running:
        print(f"listening on {running.bootstrap}", flush=True)
        stop.wait()


if __name__ == "__main__":
    main()
