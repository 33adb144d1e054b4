"""A pytest plugin for Karapace's suite (scripts/karapace_suite.sh): a fresh Strata agent for every test.

Karapace's ``registry_cluster`` fixture is function-scoped: for each test it starts a new Karapace on a new
``_schemas`` topic, so every test sees an empty registry, schema ids from 1 and the default global config,
and its tests rely on it (they expect id 1, reuse fixed subject names, count every schema listed). Given
``--registry-url``, the fixture yields that URL instead. This plugin sets the option, before each test's
fixtures run, to the registry of an agent started for that test alone (``strata serve --role agent`` on the
embedded backend in a directory of its own), and stops the agent after the test's teardown.

The Kafka listener stays the session's (``--kafka-bootstrap-servers``, read once by a session fixture).
One agent is started ahead, so that the next test's agent starts while this test runs.

Runs in Karapace's venv (Python 3.12, pytest); the agents run with Strata's interpreter. Loaded with
``-p karapace_agents`` when ``KARAPACE_STRATA_ROOT`` is set, with:
  KARAPACE_STRATA_ROOT    this checkout (the agents' PYTHONPATH)
  KARAPACE_STRATA_PYTHON  Strata's interpreter
  KARAPACE_STRATA_WORK    a directory for the agents' data (removed after each) and logs (kept)
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

START_TIMEOUT_S = 60.0


@dataclass
class Agent:
    process: subprocess.Popen[bytes]
    registry_port: int
    directory: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.registry_port}"


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class FreshAgents:
    def __init__(self, root: Path, python: str, work: Path) -> None:
        self.root = root
        self.python = python
        self.work = work
        self.started = 0
        self.spare: Agent | None = None
        self.current: Agent | None = None
        self.next_item: pytest.Item | None = None

    def start(self) -> Agent:
        self.started += 1
        directory = self.work / f"agent-{self.started:04d}"
        directory.mkdir(parents=True)
        http_port, kafka_port, registry_port = _free_ports(3)
        command = [
            self.python, "-m", "strata.cli", "serve", "--role", "agent",
            "--data-dir", str(directory / "data"), "--host", "127.0.0.1", "--port", str(http_port),
            "--kafka-port", str(kafka_port), "--schema-registry-port", str(registry_port),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(self.root)}
        with (directory / "agent.log").open("wb") as log:
            process = subprocess.Popen(command, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT)
        return Agent(process, registry_port, directory)

    def wait_ready(self, agent: Agent) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if agent.process.poll() is not None:
                raise RuntimeError(f"the agent exited with {agent.process.returncode}; see {agent.directory}")
            try:
                socket.create_connection(("127.0.0.1", agent.registry_port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(
            f"the agent's registry did not open in {START_TIMEOUT_S:g} s; see {agent.directory}"
        )

    @staticmethod
    def stop(agent: Agent) -> None:
        agent.process.terminate()
        try:
            agent.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            agent.process.kill()
            agent.process.wait()
        shutil.rmtree(agent.directory / "data", ignore_errors=True)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        self.next_item = nextitem
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        agent, self.spare = self.spare or self.start(), None
        self.current = agent
        self.wait_ready(agent)
        item.config.option.registry_url = agent.url
        if self.next_item is not None:
            self.spare = self.start()
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        try:
            return (yield)
        finally:
            if self.current is not None:
                self.stop(self.current)
                self.current = None

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        for agent in (self.current, self.spare):
            if agent is not None:
                self.stop(agent)


def pytest_configure(config: pytest.Config) -> None:
    root = os.environ.get("KARAPACE_STRATA_ROOT")
    if root:
        agents = FreshAgents(
            Path(root), os.environ["KARAPACE_STRATA_PYTHON"], Path(os.environ["KARAPACE_STRATA_WORK"])
        )
        config.pluginmanager.register(agents, "karapace-fresh-agents")
