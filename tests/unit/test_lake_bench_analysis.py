"""The lake benchmark's arithmetic (bench/lake_analysis.py): commits seen by polling, the steady rate and CPU
cost between the first and last commit of a window, the lag over a window, the files of a commit by table
and kind, and the expected share of buckets touched; and a histogram's quantiles between two scrapes
(bench/metrics.py), which its flush phase and bench.txn_bench read."""

from __future__ import annotations

import pytest

from bench.lake_analysis import (
    Commit,
    Sample,
    commits_seen,
    describe_files,
    expected_bucket_share,
    lag_summary,
    new_files,
    steady,
)
from bench.metrics import histogram_quantiles


def sample(at: float, snapshot: str | None, committed: int, cpu: float, lag: int = 0) -> Sample:
    commit_ms = None if snapshot is None else round((at - 0.1) * 1000)
    return Sample(at, lag, lag / 1000, committed, snapshot, commit_ms, cpu)


def test_a_commit_is_seen_once_at_the_time_its_writer_recorded() -> None:
    samples = [
        sample(10.0, None, 0, 0.5),
        sample(10.25, "a", 100, 0.6),
        sample(10.5, "a", 100, 0.7),
        sample(20.25, "b", 1100, 2.0),
        sample(20.5, "b", 1100, 2.1),
    ]
    assert commits_seen(samples) == [Commit(10.15, 100, 0.6), Commit(20.15, 1100, 2.0)]


def test_steady_spans_the_commits_inside_the_window_only() -> None:
    commits = [Commit(5.0, 0, 0.1), Commit(15.0, 1000, 1.0), Commit(25.0, 3000, 3.0), Commit(35.0, 5000, 5.5)]
    found = steady(commits, 10.0, 30.0)
    assert found is not None
    assert (found.commits, found.seconds, found.records, found.writer_cpu_s) == (2, 10.0, 2000, 2.0)
    assert found.records_s() == 200.0
    assert found.mib_s(1024 * 1024) == 200.0
    assert found.mib_per_cpu_s(1024 * 1024) == 1000.0
    assert steady(commits, 10.0, 20.0) is None  # one commit: no interval to measure


def test_lag_summary_over_the_window() -> None:
    samples = [sample(t, "a", 0, 0.0, lag) for t, lag in ((1.0, 999), (2.0, 100), (3.0, 300), (4.0, 200))]
    summary = lag_summary(samples, 1.5, 4.0)
    assert summary["records_mean"] == 200
    assert (summary["records_max"], summary["records_last"]) == (300, 200)
    assert summary["s_max"] == pytest.approx(0.3)
    assert lag_summary(samples, 10.0, 11.0)["records_max"] is None


def test_new_files_by_table_and_kind() -> None:
    before = {"strata/t/metadata/00000-a.metadata.json"}
    after = before | {
        "strata/t/data/timestamp_day=2026-11-28/00000-0-b.parquet",
        "strata/t/metadata/c-m0.avro",
        "strata/t/metadata/snap-1-0-c.avro",
        "strata/t/metadata/00001-d.metadata.json",
        "strata/t_state/data/key_bucket=3/00000-0-e.parquet",
        "strata/t_state/metadata/version-hint.text",
    }
    counted = new_files(before, after)
    assert counted["strata/t"] == {"data": 1, "manifest": 1, "manifest list": 1, "metadata": 1, "other": 0}
    assert counted["strata/t_state"]["data"] == 1
    assert counted["strata/t_state"]["other"] == 1
    assert describe_files(counted) == "6 (data 2, manifest 1, manifest list 1, metadata 1, other 1)"
    assert describe_files({}) == "0"


def test_histogram_quantiles_between_two_scrapes() -> None:
    name = "strata_flush_seconds"

    def scrape(counts: dict[str, float]) -> dict[str, float]:
        return {f'{name}_bucket{{le="{le}"}}': n for le, n in counts.items()}

    before = scrape({"0.005": 10, "0.01": 10, "0.05": 10, "+Inf": 10})
    after = scrape({"0.005": 60, "0.01": 108, "0.05": 110, "+Inf": 110})
    quantiles = histogram_quantiles(before, after, name, (0.5, 0.99, 1.0))
    assert quantiles == {0.5: 5.0, 0.99: 50.0, 1.0: 50.0}
    assert histogram_quantiles(after, after, name, (0.5,)) == {0.5: None}


def test_expected_bucket_share() -> None:
    assert expected_bucket_share(1, 10) == 1.0
    assert expected_bucket_share(64, 10) == pytest.approx(0.1458, abs=1e-4)
    assert expected_bucket_share(64, 1000) == pytest.approx(1.0)
