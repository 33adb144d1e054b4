"""The Kafka door's cluster timeout: Kafka's default, a setting that reaches the broker, and its floor."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig
from storage.errors import SettingsError
from strata.component_configs import broker_config
from strata.settings import load_settings


def test_an_agent_leaves_the_cluster_after_kafkas_broker_session_timeout_by_default() -> None:
    assert BrokerConfig().cluster_timeout_ms == 9000
    assert broker_config(load_settings(environ={})).cluster_timeout_ms == 9000


def test_the_cluster_timeout_is_a_setting() -> None:
    settings = load_settings(environ={"STRATA_KAFKA_CLUSTER_TIMEOUT_MS": "4000"})
    assert broker_config(settings).cluster_timeout_ms == 4000


def test_a_timeout_under_three_heartbeats_is_refused() -> None:
    with pytest.raises(SettingsError, match="STRATA_KAFKA_CLUSTER_TIMEOUT_MS must be at least three"):
        broker_config(load_settings(environ={"STRATA_KAFKA_CLUSTER_TIMEOUT_MS": "2999"}))
