"""A moto S3 server in its own process, for bench/produce_fetch.py.

Started as ``python bench/moto_server.py``: runs moto's ThreadedMotoServer on 127.0.0.1 (port chosen by the
kernel, as tests/fixtures/s3.py does), creates the buckets named on the command line, prints
``http://127.0.0.1:PORT`` on stdout and then serves until its standard input closes, it gets SIGTERM, or
``--max-seconds`` pass. Running it apart from the agent and the load generator keeps moto's CPU (it parses
and stores every upload in Python) off their GILs, as a real S3 endpoint would be.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

_FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": "/nonexistent/strata-bench/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/strata-bench/aws-credentials",
}
_MASKED_ENV = ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("buckets", nargs="*")
    parser.add_argument("--max-seconds", type=float, default=1800.0)
    args = parser.parse_args()
    os.environ.update(_FAKE_ENV)
    for name in _MASKED_ENV:
        os.environ.pop(name, None)

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
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    stop.wait(args.max_seconds)
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
