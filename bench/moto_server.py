"""A moto S3 server in its own process, for the benchmarks on an S3 backend.

    python -m bench.moto_server [BUCKET ...] [--max-seconds 1800]

Runs moto's ThreadedMotoServer on 127.0.0.1 (port chosen by the kernel, as tests/fixtures/s3.py does),
creates the buckets named on the command line, prints ``http://127.0.0.1:PORT`` on stdout and then serves
until its standard input closes, it gets SIGTERM, or ``--max-seconds`` pass. Running it apart from the agent
and the load generator keeps moto's CPU (it parses and stores every upload in Python) off their GILs, as a
real S3 endpoint would be.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from bench.harness import fake_aws


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("buckets", nargs="*")
    parser.add_argument("--max-seconds", type=float, default=1800.0)
    args = parser.parse_args()
    fake_aws(os.environ)

    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.session.Session().client("s3", endpoint_url=endpoint)
    for bucket in args.buckets:
        client.create_bucket(Bucket=bucket)
    client.close()
    print(endpoint, flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def stdin_closed() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=stdin_closed, daemon=True).start()
    stop.wait(args.max_seconds)
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
