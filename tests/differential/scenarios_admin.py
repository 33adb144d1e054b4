"""Scenarios on configs: DescribeConfigs with sources and defaults, AlterConfigs, IncrementalAlterConfigs."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin.configs import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)

from tests.differential.base import Answers, create_topic, scenario
from tests.differential.wire import Side

TOPIC = 2  # config resource types
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs operations


def describe(side: Side, name: str, keys: list[str] | None = None, synonyms: bool = False) -> Any:
    return side.call(
        DescribeConfigsRequest,
        {
            "resources": [{"resource_type": TOPIC, "resource_name": name, "configuration_keys": keys}],
            "include_synonyms": synonyms,
            "include_documentation": False,
        },
    )


def incremental(side: Side, name: str, *ops: tuple[str, int, str | None], validate_only: bool = False) -> Any:
    return side.call(
        IncrementalAlterConfigsRequest,
        {
            "resources": [
                {
                    "resource_type": TOPIC,
                    "resource_name": name,
                    "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
                }
            ],
            "validate_only": validate_only,
        },
    )


def alter(side: Side, name: str, configs: dict[str, str], validate_only: bool = False) -> Any:
    return alter_pairs(side, name, list(configs.items()), validate_only)


def alter_pairs(side: Side, name: str, configs: list[tuple[str, str]], validate_only: bool = False) -> Any:
    """AlterConfigs with the configs in order, a name given twice if the caller says so."""
    return side.call(
        AlterConfigsRequest,
        {
            "resources": [
                {
                    "resource_type": TOPIC,
                    "resource_name": name,
                    "configs": [{"name": k, "value": v} for k, v in configs],
                }
            ],
            "validate_only": validate_only,
        },
    )


@scenario(quick=True)
def topic_configs(side: Side, prefix: str) -> Answers:
    """DescribeConfigs (all, by key, unknown key, unknown topic); the two alter APIs, good and bad."""
    t = f"{prefix}-cfg"
    out: Answers = {
        "create": create_topic(side, t, 1, {"retention.ms": "3600000", "cleanup.policy": "compact"})
    }
    out["describe"] = describe(side, t)
    out["describe keys"] = describe(side, t, ["retention.ms", "segment.bytes", "no.such.config"])
    out["describe unknown topic"] = describe(side, f"{t}-missing")
    out["describe with synonyms"] = describe(side, t, ["retention.ms", "segment.bytes"], synonyms=True)
    out["set"] = incremental(side, t, ("retention.ms", SET, "7200000"), ("max.message.bytes", SET, "2000000"))
    out["delete"] = incremental(side, t, ("cleanup.policy", DELETE, None))
    out["append"] = incremental(side, t, ("cleanup.policy", APPEND, "compact"))
    out["subtract"] = incremental(side, t, ("cleanup.policy", SUBTRACT, "delete"))
    out["append to a number"] = incremental(side, t, ("retention.ms", APPEND, "5"))
    out["bad value"] = incremental(side, t, ("retention.ms", SET, "soon"))
    out["unknown config"] = incremental(side, t, ("no.such.config", SET, "1"))
    out["validate only"] = incremental(side, t, ("retention.ms", SET, "1"), validate_only=True)
    out["same config twice"] = incremental(side, t, ("retention.ms", SET, "1"), ("retention.ms", SET, "2"))
    out["unknown topic"] = incremental(side, f"{t}-missing", ("retention.ms", SET, "1"))
    out["after incremental"] = describe(side, t)
    out["alter replaces"] = alter(side, t, {"retention.bytes": "1000000"})
    out["alter bad value"] = alter(side, t, {"retention.bytes": "lots"})
    out["alter same config twice"] = alter_pairs(
        side, t, [("retention.ms", "1"), ("retention.ms", "7200000")]
    )
    out["alter validate only"] = alter(side, t, {"segment.ms": "1000"}, validate_only=True)
    out["after alter"] = describe(side, t)
    return out
