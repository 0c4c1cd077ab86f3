"""How long a container gets to stop, and what it said when it stopped, as pure functions.

The grace-period rules GT4–GT7: Kubernetes spreads these over `killContainer` (kuberuntime)
and `calculateEffectiveGracePeriod` (pod workers); here they are functions of the pod, the
container and the reason for the kill, so `killing.kill_container` reads as named steps and
the unit tests can check every branch as a table.

The termination message (`terminationMessagePath`, `terminationMessagePolicy`): what the
container wrote to its termination-log file, or with `FallbackToLogsOnError` the tail of its
log when that is empty and the container failed, as kuberuntime reads it after an exit.
And how long a pod may still be active (`activeDeadlineSeconds`).
"""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import Any

from skiff.api.types import ObjView
from skiff.clock import parse_rfc3339

__all__ = [
    "DEFAULT_TERMINATION_MESSAGE_PATH",
    "MAX_TERMINATION_MESSAGE_BYTES",
    "MAX_TERMINATION_MESSAGE_LOG_BYTES",
    "MAX_TERMINATION_MESSAGE_LOG_LINES",
    "MINIMUM_GRACE_PERIOD_SECONDS",
    "PRESTOP_EXTENSION_SECONDS",
    "KillReason",
    "active_deadline_remaining",
    "container_grace_period",
    "effective_grace_period",
    "falls_back_to_logs",
    "grace_after_prestop",
    "kill_grace_period",
    "termination_message",
    "termination_message_path",
]

# kuberuntime's minimumGracePeriodInSeconds: "always give containers a minimal shutdown
# window to avoid unnecessary SIGKILLs" (GT6).
MINIMUM_GRACE_PERIOD_SECONDS = 2
# GT5: a preStop hook still running when the period ends gets this much more time, which is
# the minimum window above (the seed: "requests a 2 second extension").
PRESTOP_EXTENSION_SECONDS = 2
DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30

# The API's default `terminationMessagePath`, and kuberuntime's limits on what is read back:
# the file's last 4096 bytes; with FallbackToLogsOnError, the log's last 80 lines, of which
# at most the last 2048 bytes.
DEFAULT_TERMINATION_MESSAGE_PATH = "/dev/termination-log"
MAX_TERMINATION_MESSAGE_BYTES = 4096
MAX_TERMINATION_MESSAGE_LOG_LINES = 80
MAX_TERMINATION_MESSAGE_LOG_BYTES = 2048


class KillReason(enum.Enum):
    """Why a container is killed; probe failures use the probe's own grace period (GT4)."""

    POD_TERMINATION = "PodTermination"
    STARTUP_PROBE = "StartupProbe"
    LIVENESS_PROBE = "LivenessProbe"
    FAILED_POST_START_HOOK = "FailedPostStartHook"
    EVICTION = "Evicted"
    DEFINITION_CHANGED = "DefinitionChanged"  # the pod's update changed the container's image
    ORPHANED = "Orphaned"


def _int_or_none(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def container_grace_period(pod: ObjView, container: ObjView, reason: KillReason) -> int:
    """GT4: the period a container kill starts from (before preStop and the minimum).

    `deletionGracePeriodSeconds` if the pod is being deleted; else the spec's
    `terminationGracePeriodSeconds`, replaced by the failed probe's own
    `terminationGracePeriodSeconds` when a startup or liveness probe caused the kill.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    deletion = _int_or_none(meta.get("deletionGracePeriodSeconds"))
    if deletion is not None:
        return deletion
    period = _int_or_none(spec.get("terminationGracePeriodSeconds"))
    if period is None:
        return MINIMUM_GRACE_PERIOD_SECONDS  # kuberuntime starts from the minimum
    probe_key = {KillReason.STARTUP_PROBE: "startupProbe",
                 KillReason.LIVENESS_PROBE: "livenessProbe"}.get(reason)
    if probe_key is not None:
        probe = container.get(probe_key) or {}
        own = _int_or_none(probe.get("terminationGracePeriodSeconds"))
        if own is not None:
            period = own
    return period


def kill_grace_period(pod: ObjView, container: ObjView, reason: KillReason, *,
                      override: int | None = None) -> int:
    """GT4 + GT6 (Kubernetes ≥ 1.28 `killContainer`): the period a container kill starts
    from. A gracePeriodOverride (the pod worker's effective period, or an eviction's)
    replaces the GT4 period *before* preStop runs, so preStop is bounded by it."""
    if override is not None:
        return override
    return container_grace_period(pod, container, reason)


def grace_after_prestop(period: float, prestop_seconds: float) -> float:
    """GT5 + GT6: what is left for stop signal → SIGKILL after a preStop hook ran.

    The hook's run time is subtracted; the result is never below the 2 s minimum
    (`minimumGracePeriodInSeconds`), whatever override started the kill: the minimum is
    applied last, as in Kubernetes ≥ 1.28.
    """
    return max(period - prestop_seconds, float(MINIMUM_GRACE_PERIOD_SECONDS))


def effective_grace_period(pod: ObjView, *, current: int = 0,
                           override: int | None = None) -> int:
    """GT7 (`calculateEffectiveGracePeriod`): the pod-level period of a termination.

    Starts from the period already in force (`current`, 0 when none); the pod's
    `deletionGracePeriodSeconds` (set by the apiserver) and an eviction `override` may only
    shorten it; when still 0 the spec's `terminationGracePeriodSeconds` is used; never below
    1. As in Kubernetes, an override of 0 alone counts as "no value" and falls back to the
    spec's period.
    """
    period = current
    deletion = _int_or_none((pod.get("metadata") or {}).get("deletionGracePeriodSeconds"))
    if deletion is not None and (period == 0 or deletion < period):
        period = deletion
    if override is not None and (period == 0 or override < period):
        period = override
    if period == 0:
        spec_period = _int_or_none((pod.get("spec") or {}).get("terminationGracePeriodSeconds"))
        if spec_period is not None:
            period = spec_period
    return max(period, 1)


def termination_message_path(container: ObjView) -> str | None:
    """Where the container writes its termination message (absolute), or None when it
    has none; a container not defaulted by the apiserver gets the API's default path."""
    path = container.get("terminationMessagePath", DEFAULT_TERMINATION_MESSAGE_PATH)
    if not isinstance(path, str) or not path.startswith("/"):
        return None
    return path


def falls_back_to_logs(container: ObjView, exit_code: int, reason: str) -> bool:
    """`FallbackToLogsOnError` applies to a failed container that did run (kuberuntime
    skips a container that could not even start: it has no log)."""
    return (container.get("terminationMessagePolicy") == "FallbackToLogsOnError"
            and exit_code != 0 and reason not in ("StartError", "ContainerCannotRun"))


def _tail_bytes(path: Path, limit: int) -> bytes:
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - limit))
        return f.read(limit)


def _log_tail(log_path: Path) -> str:
    """The last 80 lines of the log, then at most their last 2048 bytes (the same as the
    last 80 lines of the log's last 2048 bytes, so no more is read)."""
    lines = _tail_bytes(log_path, MAX_TERMINATION_MESSAGE_LOG_BYTES).split(b"\n")
    keep = MAX_TERMINATION_MESSAGE_LOG_LINES + (1 if lines[-1] == b"" else 0)
    return b"\n".join(lines[-keep:]).decode(errors="replace")


def termination_message(message_file: Path | None, log_path: Path | None, *,
                        fallback_to_logs: bool) -> str:
    """kuberuntime's termination message of an exited container: the last 4096 bytes of
    the file bound at its `terminationMessagePath` (`message_file`; None when there was
    none); when that is missing or empty and `fallback_to_logs`, the tail of its log."""
    if message_file is not None:
        try:
            data = _tail_bytes(message_file, MAX_TERMINATION_MESSAGE_BYTES)
        except FileNotFoundError:
            data = b""
        except OSError as err:
            return f"Error on reading termination log {message_file}: {err}"
        if data or not fallback_to_logs:
            return data.decode(errors="replace")
    if not fallback_to_logs or log_path is None:
        return ""
    try:
        return _log_tail(log_path)
    except FileNotFoundError:
        return ""
    except OSError as err:
        return f"Error on reading termination message from logs: {err}"


def active_deadline_remaining(pod: ObjView, start_time: str | None, *,
                              now: float) -> float | None:
    """Seconds left of the pod's `activeDeadlineSeconds` since its startTime (≤ 0: it
    passed), or None when it has none (or no usable startTime)."""
    deadline = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    if deadline is None or isinstance(deadline, bool) or start_time is None:
        return None
    try:
        return parse_rfc3339(start_time) + int(deadline) - now
    except (TypeError, ValueError):
        return None
