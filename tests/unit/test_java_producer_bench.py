"""The Java producer load of the latency phase (bench/java_producer.py): the arguments it gives
``kafka-producer-perf-test`` and how it reads the tool's steady-state summary."""

from __future__ import annotations

import pytest

from bench.java_producer import RECORD_BYTES, JavaLoad, _reason, parse_steady

# What kafka-producer-perf-test 4.4.0 printed against an agent, warm-up line and total line included.
OUTPUT = """\
102502 records sent, 20488.1 records/sec (20.01 MB/sec), 24.2 ms avg latency, 63.0 ms max latency.
512000 records sent, 20430.965682 records/sec (19.95 MB/sec), 31.41 ms avg latency, 524.00 ms max latency,\
 26 ms 50th, 56 ms 95th, 170 ms 99th, 196 ms 99.9th.
409600 steady state records sent, 20390.282756 records/sec (19.91 MB/sec), 26.79 ms avg latency,\
 70.00 ms max latency, 25 ms 50th, 44 ms 95th, 53 ms 99th, 62 ms 99.9th.
"""


def test_the_figures_are_the_steady_state_ones_not_the_totals_with_the_warm_up() -> None:
    r = parse_steady(OUTPUT)
    assert r["latency_ms"] == {"p50": 25, "p95": 44, "p99": 53, "p999": 62, "mean": 26.79, "max": 70}
    assert r["records"] == 409600
    assert r["mib_s"] == pytest.approx(20390.282756 * RECORD_BYTES / 2**20)


def test_output_without_a_steady_state_summary_is_an_error_naming_what_was_printed() -> None:
    total_only = OUTPUT.splitlines()[1]
    with pytest.raises(ValueError, match=r"no steady-state summary.*524\.00 ms max latency"):
        parse_steady(total_only)


def test_the_command_sends_warm_up_then_the_window_at_the_rate_with_keys_and_acks_all() -> None:
    cmd = JavaLoad("127.0.0.1:9092", "t", rate_mib=20, duration_s=10, warmup_s=5, linger_ms=5).tool_args()

    def after(flag: str) -> str:
        return cmd[cmd.index(flag) + 1]

    assert after("--throughput") == str(20 * 1024)  # 1 KiB records
    assert after("--warmup-records") == str(5 * 20 * 1024)
    assert after("--num-records") == str(15 * 20 * 1024)
    assert after("--key-distribution") == "random"
    assert cmd[cmd.index("--command-property") + 1 :][:2] == ["acks=all", "linger.ms=5"]


def test_a_failed_tool_is_reported_by_the_exception_it_printed() -> None:
    stderr = (
        "SLF4J: No SLF4J providers were found.\n"
        'Exception in thread "main" org.apache.kafka.common.config.ConfigException: Invalid value bogus for'
        " configuration acks: String must be one of: all, -1, 0, 1\n"
        "\tat org.apache.kafka.common.config.ConfigDef.parseValue(ConfigDef.java:498)\n"
    )
    assert _reason(stderr).endswith(
        "ConfigException: Invalid value bogus for configuration acks: String must be one of: all, -1, 0, 1"
    )
    assert _reason("SLF4J: x\nconnection refused\n") == "connection refused"
