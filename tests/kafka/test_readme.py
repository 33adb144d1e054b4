"""The README's "Use Kafka clients" examples, run as written against a real agent (only the address
changes: the test agent listens on a free port, not 9092)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.kafka import RunningBroker

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"


def _section_blocks(language: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Use Kafka clients", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.DOTALL)


def _run(code: str, broker: RunningBroker) -> str:
    code = code.replace("127.0.0.1:9092", broker.bootstrap)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_readme_confluent_kafka_example(broker: RunningBroker) -> None:
    (code,) = [b for b in _section_blocks("python") if "confluent_kafka" in b]
    lines = _run(code, broker).splitlines()
    assert len(lines) == 10
    assert sorted(int(line.split()[1]) for line in lines if line.startswith("0 ")) == list(
        range(sum(1 for line in lines if line.startswith("0 ")))
    )
    assert broker.runtime.metadata.get_topic("orders-k").configs == {"retention.ms": "86400000"}


def test_readme_kafka_python_example(broker: RunningBroker) -> None:
    (code,) = [b for b in _section_blocks("python") if "from kafka import" in b]
    assert _run(code, broker).splitlines() == ["events-k 0 0", "0 b'user-1' b'signed up'"]
