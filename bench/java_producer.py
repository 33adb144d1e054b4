"""Kafka's own Java producer as a fixed-rate load: ``kafka-producer-perf-test`` for the latency phase.

    python -m bench.java_producer --bootstrap 127.0.0.1:9092 --topic t --rate-mib 20 --duration 10

Why a second client: librdkafka puts one partition in each ProduceRequest
(https://github.com/confluentinc/librdkafka/issues/1700), so a keyed load over 32 partitions at linger.ms
5 sends a request per partition batch, thousands a second at 20 MiB/s. Kafka's Java client drains every
ready partition led by a broker into one request, at most ``max.in.flight.requests.per.connection`` (5)
at a time. The agent's CPU goes mostly per request, so the same bytes cost it far less from Java, and a
latency figure means little without the client it came from.

Why this tool rather than a generator of our own: ``org.apache.kafka.tools.ProducerPerformance`` is what a
Kafka user runs (the ``kafka-producer-perf-test`` script), from the pinned ``kafka-tools`` jar that
``make kafka-java`` fetches (tests/java/kafka.py). It throttles to a record rate, keys records at random
(``--key-distribution random``: Java's murmur2 partitioner spreads them as the librdkafka load's keys are
spread), measures send() -> acknowledgement of every record, and leaves the first ``--warmup-records`` out
of a "steady state" summary, so the JVM's warm-up (class loading, JIT) is not counted. Its percentiles
are whole milliseconds.

The producer keeps Java's defaults but for ``linger.ms`` (Kafka 4's default is 5) and any ``--property``;
``acks=all`` is set though it is the default since Kafka 3.0. That is an idempotent producer with 5
requests in flight and 16 KiB batches. Its drain takes at most one batch per partition into a request, up
to ``max.request.size`` (1 MiB), so at most 5 x min(partitions x ``batch.size``, ``max.request.size``) is
ever in flight.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from tests.java import kafka as kafka_jars

TOOL = "org.apache.kafka.tools.ProducerPerformance"
RECORD_BYTES = 1024  # the value; the key is a decimal integer below KEY_RANGE (up to 6 bytes)
KEY_RANGE = 1_000_000

# "409600 steady state records sent, 20390.3 records/sec (19.91 MB/sec), 26.79 ms avg latency,
#  70.00 ms max latency, 25 ms 50th, 44 ms 95th, 53 ms 99th, 62 ms 99.9th."
_STEADY = re.compile(
    r"(?P<records>\d+) steady state records sent, (?P<rate>[\d.]+) records/sec \((?P<mb_s>[\d.]+) MB/sec\),"
    r" (?P<mean>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th,"
    r" (?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th"
)


@dataclass(frozen=True)
class JavaLoad:
    """One fixed-rate run: ``warmup_s`` seconds left out of the figures, then ``duration_s`` measured."""

    bootstrap: str
    topic: str
    rate_mib: float
    duration_s: float
    warmup_s: float
    linger_ms: float
    props: tuple[str, ...] = ()  # more producer settings, NAME=VALUE (they win over the ones above)

    @property
    def records_per_s(self) -> int:
        """The tool's ``--throughput``: records a second, each ``RECORD_BYTES`` of value."""
        return max(1, round(self.rate_mib * 1024 * 1024 / RECORD_BYTES))

    @property
    def timeout_s(self) -> float:
        """How long to wait for the tool: twice its run (it may fall behind the rate), and a JVM's start."""
        return 2 * (self.warmup_s + self.duration_s) + 120

    def command(self) -> list[str]:
        """``java -cp <Kafka jars> ProducerPerformance ...``; KafkaJarsMissing before ``make kafka-java``."""
        cmd = kafka_jars.command(TOOL, *self.tool_args(), heap="512m")
        # The summary's numbers are formatted in the JVM's locale: a decimal comma would not parse.
        return [cmd[0], "-Duser.language=en", "-Duser.country=US", *cmd[1:]]

    def tool_args(self) -> list[str]:
        warmup = round(self.records_per_s * self.warmup_s)
        total = warmup + round(self.records_per_s * self.duration_s)
        args = ["--topic", self.topic, "--num-records", str(total), "--warmup-records", str(warmup)]
        args += ["--throughput", str(self.records_per_s), "--record-size", str(RECORD_BYTES)]
        args += ["--key-distribution", "random", "--record-key-range", str(KEY_RANGE)]
        args += ["--reporting-interval", str(round(1000 * (self.warmup_s + self.duration_s) + 60_000))]
        args += ["--bootstrap-server", self.bootstrap, "--command-property", "acks=all"]
        args += [f"linger.ms={self.linger_ms:g}", *self.props]
        return args


def parse_steady(stdout: str) -> dict[str, Any]:
    """The steady-state summary as figures: ``latency_ms`` (p50, p95, p99, p999, mean, max), ``mib_s``,
    ``records``; ValueError if the tool printed none (it prints one only after a warm-up)."""
    found = _STEADY.search(stdout)
    if found is None:
        raise ValueError(f"no steady-state summary in the tool's output: {stdout.strip()[-300:]!r}")
    g = found.groupdict()
    quantiles = {q: float(g[q]) for q in ("p50", "p95", "p99", "p999", "mean", "max")}
    rate = float(g["rate"])
    return {
        "latency_ms": quantiles,
        "records": int(g["records"]),
        "records_s": rate,
        "mib_s": rate * RECORD_BYTES / (1024 * 1024),
    }


def start(load: JavaLoad) -> subprocess.Popen[str]:
    """The tool, started; KafkaJarsMissing or OSError (no ``java``) if it cannot be."""
    return subprocess.Popen(load.command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def exited_within(proc: subprocess.Popen[str], seconds: float) -> bool:
    """Wait up to ``seconds``; whether the tool ended meanwhile (it prints too little to fill its pipes)."""
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def finish(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    """Wait for the tool; its steady-state figures, or ``error`` with what it said."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"error": f"kafka-producer-perf-test still running after {timeout:g} s"}
    if proc.returncode != 0:
        return {"error": f"kafka-producer-perf-test exited {proc.returncode}: {_reason(err)}"}
    try:
        return parse_steady(out)
    except ValueError as exc:
        return {"error": str(exc)}


def _reason(stderr: str) -> str:
    """The exception a failed tool printed (its first line naming one), else its last words."""
    lines = kafka_jars.without_slf4j(stderr).strip().splitlines()
    named = [line.strip() for line in lines if "Exception" in line or "Error" in line]
    return (named[0] if named else " ".join(lines))[-300:]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--rate-mib", type=float, default=20.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--linger-ms", type=float, default=5.0)
    parser.add_argument("--property", action="append", default=[], help="a producer setting, NAME=VALUE")
    a = parser.parse_args(argv)
    if a.warmup <= 0:
        parser.error("--warmup must be over 0: the tool prints its steady-state figures only after one")
    load = JavaLoad(a.bootstrap, a.topic, a.rate_mib, a.duration, a.warmup, a.linger_ms, tuple(a.property))
    result = finish(start(load), timeout=load.timeout_s)
    print(json.dumps(result, indent=2))
    return 1 if "error" in result else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
