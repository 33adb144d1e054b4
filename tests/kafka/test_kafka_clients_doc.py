"""docs/kafka-clients.md's examples, run as written against a real agent (only the address changes: the test
agent listens on a free port, not 9092). kcat must be installed (`make kcat`)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from tests.fixtures.docs import DOCS, blocks, examples, section
from tests.fixtures.kafka import RunningBroker

pytestmark = pytest.mark.integration

PAGE = DOCS / "kafka-clients.md"


def _block(heading: str, language: str, marker: str) -> str:
    """The section's one ``language`` block containing ``marker``."""
    (code,) = [b for b in blocks(section(PAGE, heading), language) if marker in b]
    return code


def _output(heading: str, language: str, marker: str) -> list[str]:
    """The output block shown right under the section's one ``language`` block containing ``marker``."""
    (output,) = [out for code, out in examples(section(PAGE, heading), language) if marker in code]
    assert output is not None, f"{PAGE.name}: no output under the block with {marker!r}"
    return output.splitlines()


def _kcat() -> str:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed (the Makefile's kcat step: apt-get install kcat)"
    return kcat


def _run(code: str, broker: RunningBroker) -> str:
    code = code.replace("127.0.0.1:9092", broker.bootstrap)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_kcat_example(broker: RunningBroker) -> None:
    """The kcat lines run by the shell as written: -L lists the broker, then produce and consume."""
    _kcat()
    code = _block("## Examples", "sh", "-t greetings")
    assert code.splitlines()[0].startswith("kcat -b 127.0.0.1:9092 -L")
    script = code.replace("127.0.0.1:9092", broker.bootstrap)
    done = subprocess.run(["bash", "-ec", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert f" at {broker.bootstrap}" in done.stdout  # -L lists the broker
    consumed = [line for line in done.stdout.splitlines() if "(offset " in line]
    assert consumed == _output("## Examples", "sh", "-t greetings")


def test_confluent_kafka_example(broker: RunningBroker) -> None:
    lines = _run(_block("## Examples", "python", '"orders-k"'), broker).splitlines()
    assert len(lines) == 10
    assert sorted(int(line.split()[1]) for line in lines if line.startswith("0 ")) == list(
        range(sum(1 for line in lines if line.startswith("0 ")))
    )
    assert broker.runtime.metadata.get_topic("orders-k").configs == {"retention.ms": "86400000"}


def test_kafka_python_example(broker: RunningBroker) -> None:
    code = _block("## Examples", "python", "from kafka import")
    assert _run(code, broker).splitlines() == ["events-k 0 0", "0 b'user-1' b'signed up'"]


def test_consumer_group_examples(kafka_factory: Callable[..., Any]) -> None:
    """The confluent-kafka group member, then kcat -G in another group, twice: the second run resumes
    after the first one's commits and prints nothing."""
    kcat = _kcat()
    with kafka_factory(group_initial_rebalance_delay_ms=100) as broker:
        lines = _run(_block("## Consumer groups", "python", '"dashboard"'), broker).splitlines()
        want = _output("## Consumer groups", "python", '"dashboard"')
        # The order of the partitions' records may differ; within a partition it may not.
        assert sorted(lines[:-1]) == sorted(want[:-1])
        for p in (0, 1):
            assert [x for x in lines if x.startswith(f"{p} ")] == [x for x in want if x.startswith(f"{p} ")]
        assert lines[-1] == want[-1] == "[(0, 4), (1, 2)]"
        offsets = broker.runtime.metadata.group_offsets("dashboard")
        assert [(o.partition, o.offset) for o in offsets] == [(0, 4), (1, 2)]

        command = _block("## Consumer groups", "sh", " -G ")
        argv = shlex.split(command.replace("127.0.0.1:9092", broker.bootstrap))
        assert argv[0] == "kcat"

        def run_kcat() -> list[str]:
            done = subprocess.run([kcat, *argv[1:]], capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 0, done.stderr
            return done.stdout.splitlines()

        first = run_kcat()
        want = _output("## Consumer groups", "sh", " -G ")
        assert sorted(first) == sorted(want)
        for p in (0, 1):
            assert [x for x in first if x.startswith(f"{p} ")] == [x for x in want if x.startswith(f"{p} ")]
        assert run_kcat() == []
