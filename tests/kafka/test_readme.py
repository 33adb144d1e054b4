"""The README's "Use Kafka clients" examples, run as written against a real agent (only the address
changes: the test agent listens on a free port, not 9092). kcat must be installed (`make kcat`)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.kafka import RunningBroker

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"


def _section_blocks(language: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Use Kafka clients", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.DOTALL)


def _block(language: str, marker: str) -> str:
    """The section's one ``language`` block containing ``marker``."""
    (code,) = [b for b in _section_blocks(language) if marker in b]
    return code


def _run(code: str, broker: RunningBroker) -> str:
    code = code.replace("127.0.0.1:9092", broker.bootstrap)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_readme_confluent_kafka_example(broker: RunningBroker) -> None:
    lines = _run(_block("python", '"orders-k"'), broker).splitlines()
    assert len(lines) == 10
    assert sorted(int(line.split()[1]) for line in lines if line.startswith("0 ")) == list(
        range(sum(1 for line in lines if line.startswith("0 ")))
    )
    assert broker.runtime.metadata.get_topic("orders-k").configs == {"retention.ms": "86400000"}


def test_readme_kafka_python_example(broker: RunningBroker) -> None:
    (code,) = [b for b in _section_blocks("python") if "from kafka import" in b]
    assert _run(code, broker).splitlines() == ["events-k 0 0", "0 b'user-1' b'signed up'"]


def _expected_output(code_marker: str) -> list[str]:
    """The output block that follows the code block containing ``code_marker``."""
    text = README.read_text(encoding="utf-8").split("## Use Kafka clients", 1)[1].split("\n## ", 1)[0]
    after = text.split(code_marker, 1)[1].split("```\n```\n", 1)[1]
    return after.split("```", 1)[0].splitlines()


def test_readme_consumer_group_examples(kafka_factory: Callable[..., Any]) -> None:
    """The confluent-kafka group member, then kcat -G in another group, twice: the second run resumes
    after the first one's commits and prints nothing."""
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed (the Makefile's kcat step: apt-get install kcat)"
    with kafka_factory(group_initial_rebalance_delay_ms=100) as broker:
        lines = _run(_block("python", '"dashboard"'), broker).splitlines()
        want = _expected_output('"dashboard"')
        # The order of the partitions' records may differ; within a partition it may not.
        assert sorted(lines[:-1]) == sorted(want[:-1])
        for p in (0, 1):
            assert [x for x in lines if x.startswith(f"{p} ")] == [x for x in want if x.startswith(f"{p} ")]
        assert lines[-1] == want[-1] == "[(0, 4), (1, 2)]"
        offsets = broker.runtime.metadata.group_offsets("dashboard")
        assert [(o.partition, o.offset) for o in offsets] == [(0, 4), (1, 2)]

        (command,) = [line for b in _section_blocks("sh") for line in b.splitlines() if " -G " in line]
        argv = shlex.split(command.replace("127.0.0.1:9092", broker.bootstrap))
        assert argv[0] == "kcat"

        def run_kcat() -> list[str]:
            done = subprocess.run([kcat, *argv[1:]], capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 0, done.stderr
            return done.stdout.splitlines()

        first = run_kcat()
        want = _expected_output("clicks\n")
        assert sorted(first) == sorted(want)
        for p in (0, 1):
            assert [x for x in first if x.startswith(f"{p} ")] == [x for x in want if x.startswith(f"{p} ")]
        assert run_kcat() == []
