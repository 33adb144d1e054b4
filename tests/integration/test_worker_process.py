"""Role all's worker in a child process (strata/worker_process.py), as ``strata serve`` runs it: the child
compacts what the agent wrote, its metrics and requests show at the agent's /metrics, it is restarted when
it dies, and it ends when the agent does, however the agent ends."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from bench.probes import proc_stat
from bench.probes import worker_children as children
from tests.fixtures.processes import AgentProcess, agent_process

pytestmark = pytest.mark.integration

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 30) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def the_worker(agent: AgentProcess) -> int:
    def one() -> int | None:
        pids = children(agent.proc.pid)
        return pids[0] if len(pids) == 1 else None

    return wait_for("the worker process", one)


def metric(agent: AgentProcess, pattern: str) -> float | None:
    text = httpx.get(agent.url + "/metrics", timeout=5).text
    match = re.search(pattern + r" ([0-9.e+]+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else None


def post(agent: AgentProcess, path: str, body: Any = None) -> httpx.Response:
    return httpx.post(agent.url + path, json=body, timeout=10)


def test_the_worker_process_compacts_and_reports_to_the_agent(tmp_path: Path) -> None:
    args = ["--data-dir", str(tmp_path / "data"), "--worker-interval-ms", "3600000"]
    with agent_process(args, tmp_path) as agent:
        worker = the_worker(agent)
        assert worker != agent.proc.pid
        topic = {"name": "users", "partitions": 1, "configs": {"cleanup.policy": "compact"}}
        assert post(agent, "/v1/topics", topic).status_code == 201
        for r in range(4):
            records = [{"key": f"k{k}", "value": f"v{r}"} for k in range(10)]
            assert post(agent, "/v1/topics/users/records", {"records": records}).status_code == 200
        gets_before = metric(agent, r'strata_object_store_requests_total\{kind="GET"\}') or 0.0

        # The agent plans; the worker, woken through the pipe, runs the job: no round is due for an hour.
        assert post(agent, "/v1/topics/users/compact").status_code == 202
        committed = r'strata_compaction_jobs_total\{kind="clean",outcome="committed"\}'
        assert (
            wait_for("the child's compaction metrics at the agent", lambda: metric(agent, committed)) == 1.0
        )
        # The job's reads were the child's, counted at the agent as the console's cost view counts them.
        assert (metric(agent, r'strata_object_store_requests_total\{kind="GET"\}') or 0.0) > gets_before
        response = httpx.get(agent.url + "/v1/topics/users/partitions/0/records?offset=0", timeout=5)
        values = {r["key"]: r["value"] for r in response.json()["records"]}
        assert values == {f"k{k}": "v3" for k in range(10)}
        assert children(agent.proc.pid) == [worker]


def test_a_dead_worker_is_replaced_and_the_agent_keeps_serving(tmp_path: Path) -> None:
    with agent_process(["--data-dir", str(tmp_path / "data")], tmp_path) as agent:
        first = the_worker(agent)
        os.kill(first, signal.SIGKILL)
        second = wait_for(
            "a new worker process",
            lambda: next((pid for pid in children(agent.proc.pid) if pid != first), None),
        )
        assert second != first
        assert httpx.get(agent.url + "/healthz", timeout=5).status_code == 200
        assert "worker process exited" in agent.log()


def test_the_worker_ends_with_the_agent_even_when_the_agent_is_killed(tmp_path: Path) -> None:
    with agent_process(["--data-dir", str(tmp_path / "data")], tmp_path) as agent:
        worker = the_worker(agent)
        agent.kill()  # SIGKILL: no shutdown runs; the child sees its pipe close

        def ended() -> bool:
            fields = proc_stat(worker)
            return fields is None or fields[0] == "Z"

        wait_for("the orphaned worker to end", ended, timeout_s=15)
