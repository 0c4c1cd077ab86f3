"""DaemonSet: one pod on every eligible node, kept through not-ready and unreachable."""

from skiff.controller_manager.daemonset.controller import DaemonSetController

__all__ = ["DaemonSetController"]
