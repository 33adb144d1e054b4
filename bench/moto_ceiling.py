"""How many MiB/s of PUTs moto's S3 server can take on this machine: the ceiling of every "on moto" figure.

    python -m bench.moto_ceiling [--object-mib 8] [--objects 48] [--concurrency 1,2,3]
                                 [--server threaded|standalone]

Starts moto in its own process, as the other benchmarks do (``threaded``: bench/moto_server.py, moto's
ThreadedMotoServer; ``standalone``: moto's own ``moto_server`` command, with werkzeug's request log, as
other projects' benchmarks run it), then PUTs ``--objects`` objects of ``--object-mib`` MiB through
the agent's own async S3 store (storage/objectstore, aiobotocore, the same client settings as a flush) on
uvloop, as ``strata serve`` runs, with 1, 2, ... uploads in flight. Nothing else runs: no agent, no Kafka
client, no metadata. For each level it reports MiB/s and the CPU that moto's process and this client spent
per MiB.

Why it exists: moto keeps every object in Python (it spools the body to a temporary file and takes its MD5
for the ETag), so the PUT rate it can absorb on a 2-core machine bounds every benchmark figure on moto,
however little the agent does. docs/benchmarks.md compares the S3 figures with this ceiling.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3
import botocore.exceptions
import uvloop

from bench.harness import MiB, Moto, bench_env, fake_aws, free_port, start_moto
from bench.probes import proc_cpu_s
from storage.objectstore import open_async_object_store


def start_standalone(binary: str, bucket: str, workdir: Path) -> Moto:
    """moto's own ``moto_server`` command (werkzeug, request log on)."""
    port = free_port()
    log = (workdir / "moto.log").open("w")
    proc = subprocess.Popen(
        [binary, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log, env=bench_env()
    )
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.session.Session().client("s3", endpoint_url=endpoint, region_name="us-east-1")
    deadline = time.monotonic() + 60
    while True:
        try:
            client.create_bucket(Bucket=bucket)
            break
        # Refused until the server listens; bounded by the deadline.
        except botocore.exceptions.EndpointConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise
            time.sleep(0.2)
    client.close()
    return Moto(proc, endpoint, log)


def self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def put_all(
    endpoint: str, bucket: str, body: bytes, objects: int, concurrency: int, moto_pid: int
) -> tuple[float, float, float]:
    """PUT ``objects`` copies of ``body`` with ``concurrency`` uploads in flight: seconds taken, and the CPU
    seconds moto and this process spent meanwhile (the client's set-up and first PUT left out)."""
    store = open_async_object_store(f"s3://{bucket}/ceiling", endpoint_url=endpoint, region="us-east-1")
    try:
        await store.put("warmup", body)  # the client and its connection pool, outside the timing
        queue = iter(range(objects))

        async def worker() -> None:
            for i in queue:
                await store.put(f"c{concurrency}/{i:06d}", body)

        moto_before, self_before = proc_cpu_s(moto_pid), self_cpu_s()
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - started
        return seconds, proc_cpu_s(moto_pid) - moto_before, self_cpu_s() - self_before
    finally:
        await store.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--object-mib", type=float, default=8.0)
    parser.add_argument("--objects", type=int, default=48)
    parser.add_argument("--concurrency", default="1,2,3")
    parser.add_argument("--server", choices=("threaded", "standalone"), default="threaded")
    parser.add_argument("--moto-server-bin", default=str(Path(sys.executable).with_name("moto_server")))
    args = parser.parse_args()
    fake_aws(os.environ)
    levels = [int(x) for x in args.concurrency.split(",")]
    size = int(args.object_mib * MiB)
    body = os.urandom(size)
    bucket = "ceiling"
    rows = []
    with tempfile.TemporaryDirectory(prefix="strata-moto-ceiling-") as tmp:
        if args.server == "standalone":
            moto = start_standalone(args.moto_server_bin, bucket, Path(tmp))
        else:
            moto = start_moto([bucket], Path(tmp))
        try:
            for level in levels:
                seconds, moto_cpu, client_cpu = uvloop.run(
                    put_all(moto.endpoint, bucket, body, args.objects, level, moto.proc.pid)
                )
                mib = size * args.objects / MiB
                rows.append(
                    (level, mib / seconds, 1000 * moto_cpu / mib, moto_cpu / seconds, 1000 * client_cpu / mib)
                )
        finally:
            moto.stop()
    print(
        f"moto ({args.server}), {args.objects} PUTs of {args.object_mib:g} MiB per level, load1 at end "
        f"{os.getloadavg()[0]:.2f}"
    )
    print("| uploads in flight | MiB/s | moto CPU ms/MiB | moto cores | client CPU ms/MiB |")
    print("| --- | --- | --- | --- | --- |")
    for level, rate, moto_ms, moto_cores, client_ms in rows:
        print(f"| {level} | {rate:.1f} | {moto_ms:.2f} | {moto_cores:.2f} | {client_ms:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
