"""Kafka's jars and a launcher for its tools by class name, without the distribution's shell scripts.

``make kafka-java`` resolves Apache Kafka (tools/kafka/pom.xml, one pinned version) from Maven Central into
``.cache/kafka/lib``; ``python -m tests.java.kafka verify`` checks every jar there against the SHA-256 list
committed in tools/kafka/jars.sha256 (a missing, extra or changed jar fails, naming it), and
``python -m tests.java.kafka pin`` rewrites that list after a deliberate version change.

``run`` starts ``java -cp .cache/kafka/lib/* <class> <args>``: what the ``kafka-*.sh`` scripts do, minus
their environment handling. The tools used here (their main classes in Kafka 4):
``org.apache.kafka.tools.TopicCommand`` (kafka-topics), ``org.apache.kafka.tools.ConfigCommand``
(kafka-configs), ``org.apache.kafka.tools.consumer.group.ConsumerGroupCommand`` (kafka-consumer-groups),
``org.apache.kafka.tools.AclCommand`` (kafka-acls), ``org.apache.kafka.tools.DeleteRecordsCommand``,
``org.apache.kafka.tools.VerifiableProducer``, ``org.apache.kafka.tools.VerifiableConsumer``,
``org.apache.kafka.tools.TransactionsCommand``, ``kafka.Kafka`` (the broker) and
``kafka.tools.StorageTool`` (kafka-storage).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / ".cache" / "kafka" / "lib"
PINS = ROOT / "tools" / "kafka" / "jars.sha256"

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
ACLS = "org.apache.kafka.tools.AclCommand"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
VERIFIABLE_PRODUCER = "org.apache.kafka.tools.VerifiableProducer"
VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
BROKER = "kafka.Kafka"
STORAGE = "kafka.tools.StorageTool"


class KafkaJarsMissing(RuntimeError):
    """The jars are not there, or not the pinned ones; the message says what to run."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def pins() -> dict[str, str]:
    out = {}
    for line in PINS.read_text().splitlines():
        digest, name = line.split()
        out[name] = digest
    return out


def verify() -> list[str]:
    """What differs from the pins (missing, extra, changed jars); empty when everything matches."""
    expected = pins()
    present = {p.name: p for p in LIB.glob("*.jar")} if LIB.is_dir() else {}
    problems = [f"missing {name}" for name in sorted(set(expected) - set(present))]
    problems += [f"not pinned {name}" for name in sorted(set(present) - set(expected))]
    problems += [
        f"changed {name}: SHA-256 {_sha256(present[name])}, pinned {digest}"
        for name, digest in sorted(expected.items())
        if name in present and _sha256(present[name]) != digest
    ]
    return problems


def classpath() -> str:
    if not LIB.is_dir() or not any(LIB.glob("kafka-clients-*.jar")):
        raise KafkaJarsMissing(f"Kafka's jars are not in {LIB}: run `make kafka-java`")
    return str(LIB / "*")


def command(main_class: str, *args: str, heap: str = "256m", extra_cp: Sequence[Path] = ()) -> list[str]:
    cp = ":".join([classpath(), *(str(p) for p in extra_cp)])
    return ["java", f"-Xmx{heap}", "-cp", cp, main_class, *args]


def run(
    main_class: str, *args: str, timeout: float = 120, input_text: str | None = None, heap: str = "256m"
) -> subprocess.CompletedProcess[str]:
    """Run one tool to its end; its stdout and stderr as text (SLF4J's no-binding notice filtered out)."""
    done = subprocess.run(
        command(main_class, *args, heap=heap),
        input=input_text,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    done.stderr = without_slf4j(done.stderr)
    return done


def without_slf4j(stderr: str) -> str:
    """A tool's stderr without SLF4J's no-binding notice (Kafka's jars bring no logging backend)."""
    return "\n".join(line for line in stderr.splitlines() if not line.startswith("SLF4J:"))


def main(argv: list[str]) -> int:
    if argv[:1] == ["verify"]:
        problems = verify()
        for problem in problems:
            print(f"{LIB}: {problem}", file=sys.stderr)
        if problems:
            print(
                "Kafka's jars differ from tools/kafka/jars.sha256: run `make kafka-java` again",
                file=sys.stderr,
            )
            return 1
        print(f"{len(pins())} Kafka jars as pinned")
        return 0
    if argv[:1] == ["pin"]:
        lines = [f"{_sha256(p)}  {p.name}" for p in sorted(LIB.glob("*.jar"))]
        PINS.write_text("\n".join(lines) + "\n")
        print(f"pinned {len(lines)} jars in {PINS}")
        return 0
    print("usage: python -m tests.java.kafka verify|pin", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
