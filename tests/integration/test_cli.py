"""The strata CLI as a user runs it, against a live server."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.cli import build_parser, main
from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_topics_produce_consume(
    server: RunningServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ["--url", server.url]
    code, out, _ = _run(capsys, "topics", "create", "events", "-p", "3", "-c", "retention.ms=60000", *url)
    assert code == 0, out
    assert _run(capsys, "topics", "list", *url)[1].split() == ["events"]
    code, out, _ = _run(capsys, "topics", "describe", "events", *url)
    assert "retention.ms" in out
    assert "60000" in out

    lines = [f"user-{i}\tclicked {i}" for i in range(1200)] + ["no separator here"]
    source = tmp_path / "input.tsv"
    source.write_text("\n".join(lines) + "\n")
    code, _, err = _run(capsys, "produce", "events", str(source), *url)
    assert code == 0
    assert "produced 1201 record(s)" in err

    code, out, _ = _run(capsys, "consume", "events", *url)
    assert code == 0
    assert sorted(out.splitlines()) == sorted([*lines[:1200], "\tno separator here"])

    code, out, _ = _run(
        capsys, "consume", "events", "-p", "0", "-o", "0", "-c", "3", "--format", "%o:%k\\n", *url
    )
    assert [line.split(":")[0] for line in out.splitlines()] == ["0", "1", "2"]

    code, _, err = _run(capsys, "topics", "create", "events", *url)
    assert code == 1
    assert "40002" in err
    assert _run(capsys, "topics", "delete", "events", *url)[0] == 0
    assert _run(capsys, "topics", "list", *url)[1].split() == []


def test_errors_are_one_line_not_tracebacks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / ("a-directory-deeper-than-a-terminal-is-wide-" * 3) / "missing.tsv")
    code, _, err = _run(capsys, "produce", "t", missing, "--url", "http://127.0.0.1:9")
    assert code == 1
    assert missing in err  # one line, never wrapped: the path can be copied whole
    assert err.count("\n") == 1
    code, _, err = _run(capsys, "topics", "list", "--url", "http://127.0.0.1:9")
    assert code == 1
    assert "cannot reach" in err


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        [],
        ["serve"],
        ["topics"],
        ["topics", "create"],
        ["topics", "list"],
        ["topics", "describe"],
        ["topics", "delete"],
        ["produce"],
        ["consume"],
    ):
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args([*argv, "--help"])
        assert exited.value.code == 0
        assert "usage: strata" in capsys.readouterr().out
