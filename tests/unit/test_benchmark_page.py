"""docs/benchmarks.md's tables are exactly what bench.report renders from the results files in bench/figures/.

The page's prose is written by hand, its tables never: a figure reaches the page only through a results
file, with its command, date, commit and machine. This fails when someone edits a table, adds a results
file without rendering the page, or changes the renderer without rendering it again; the fix is
``python -m bench.report``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import report
from bench.results import AREAS, AWAITING_FIRST_RUN, FIGURES_DIR


def test_page_tables_equal_what_the_results_files_render() -> None:
    page = report.PAGE.read_text()
    assert report.render_page(page, report.current()) == page, "run: python -m bench.report"


def test_every_area_has_a_table_with_figures() -> None:
    """Every area but those awaiting their first recorded run has figures; those have none (once one has,
    it comes off ``AWAITING_FIRST_RUN``)."""
    figures = report.current()
    assert AWAITING_FIRST_RUN.issubset(AREAS)
    assert {area for area, _ in figures} == set(AREAS) - AWAITING_FIRST_RUN


def test_the_newest_run_gives_a_figure_and_older_runs_fill_in(tmp_path: Path) -> None:
    def write(run_id: str, rows: list[tuple[str, str]]) -> None:
        data = {
            "benchmark": "kafka_bench",
            "run_id": run_id,
            "date": f"{run_id[:4]}-{run_id[4:6]}-{run_id[6:8]}",
            "commit": "abc1234",
            "command": "python -m bench.kafka_bench",
            "machine": "2 vCPU",
            "figures": [
                {"area": "kafka", "figure": name, "value": value, "target": "-", "pass": None}
                for name, value in rows
            ],
        }
        (tmp_path / f"kafka_bench-{run_id}.json").write_text(json.dumps(data))

    write("20260101-000000", [("produce", "1 MiB/s"), ("catch-up", "2 MiB/s")])
    write("20260102-000000", [("produce", "3 MiB/s")])
    current = report.current(tmp_path)
    assert [(name, row["value"], src["date"]) for (_, name), (row, src) in current.items()] == [
        ("produce", "3 MiB/s", "2026-01-02"),
        ("catch-up", "2 MiB/s", "2026-01-01"),
    ]
    text = "".join(f"{report.begin_marker(a)}\nstale\n{report.end_marker(a)}\n" for a in AREAS)
    rendered = report.render_page(text, current)
    assert "stale" not in rendered
    assert (
        "| produce | 3 MiB/s | - | - | `python -m bench.kafka_bench` | 2026-01-02, abc1234 | 2 vCPU |"
        in rendered
    )
    assert report.render_page(rendered, current) == rendered


def test_retired_figures_are_not_shown() -> None:
    """A figure whose measured shape no longer exists (report.RETIRED) leaves the page, with its run."""
    shown = [name for _, name in report.current()]
    assert shown, "the committed results files give figures"
    assert not [name for name in shown if name.startswith(report.RETIRED)]
    retired = [
        row["figure"]
        for path in FIGURES_DIR.glob("*.json")
        for row in json.loads(path.read_text())["figures"]
        if row["figure"].startswith(report.RETIRED)
    ]
    assert retired, "each retired prefix names figures of a committed run"


def test_a_results_file_without_its_heads_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x-1.json").write_text(json.dumps({"benchmark": "x", "figures": []}))
    with pytest.raises(ValueError, match="missing"):
        report.load(tmp_path)


def test_committed_results_files_name_their_source() -> None:
    for path in FIGURES_DIR.glob("*.json"):
        data = json.loads(path.read_text())
        assert path.name == f"{data['benchmark']}-{data['run_id']}.json"
        assert data["command"].startswith(f"python -m bench.{data['benchmark']}")
