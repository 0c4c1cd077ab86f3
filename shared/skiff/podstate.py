"""The kubelet's per-pod state file, `<root-dir>/pods/<uid>/state.json`.

The kubelet writes it (atomically) after every change of a container's process, so that a
restarted kubelet re-adopts the processes it left running; the local power fence agent
reads it to find a fenced node's pod processes. Two services share the file, so its name
and its reading live here; what goes into it is the kubelet's (`skiff.kubelet.records`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from skiff.api.types import Obj


def state_path(pod_dir: Path) -> Path:
    return pod_dir / "state.json"


def write_state(pod_dir: Path, data: Obj) -> None:
    """Replace the pod's state file in one step: a reader sees the old or the new file."""
    pod_dir.mkdir(parents=True, exist_ok=True)
    tmp = state_path(pod_dir).with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, state_path(pod_dir))


def load_state(pod_dir: Path) -> Obj | None:
    """The pod's recorded state, or None when there is none (or it cannot be read)."""
    try:
        data = json.loads(state_path(pod_dir).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
