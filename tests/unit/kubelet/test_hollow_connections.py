"""Hollow nodes spread their heartbeats over several connections (each real kubelet has its
own): with one for thousands of nodes, `apiserver --processes` (SO_REUSEPORT spreads
connections, not requests) left one apiserver with most of the Lease renewals."""

from __future__ import annotations

import pytest

from skiff.kubelet.app import heartbeat_connections
from skiff.kubelet.settings import parse_settings
from skiff.settings import SettingsError


def test_issue37_hollow_nodes_get_one_heartbeat_connection_per_625_by_default() -> None:
    settings = parse_settings(["--runtime", "fake", "--hollow-nodes", "2500"])
    assert settings.hollow_nodes_per_connection == 625
    assert heartbeat_connections(2500, settings.hollow_nodes_per_connection) == 4
    assert heartbeat_connections(2501, 250) == 11
    assert heartbeat_connections(1, 250) == 1  # a real kubelet: one


def test_issue37_hollow_nodes_per_connection_below_one_is_refused_naming_the_flag() -> None:
    with pytest.raises(SettingsError, match="--hollow-nodes-per-connection: 0 must be at "
                                            "least 1"):
        parse_settings(["--runtime", "fake", "--hollow-nodes", "10",
                        "--hollow-nodes-per-connection", "0"])
