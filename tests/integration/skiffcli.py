"""The `skiff` command as tests run it: a real subprocess against a data directory, and
a cluster brought up with `skiff up --detach` for a module and taken down after."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path


def skiff(data_dir: Path, *args: str, stdin: str | None = None,
          env: dict[str, str] | None = None,
          timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "skiff.cli.main", *args], input=stdin, text=True,
        capture_output=True, timeout=timeout,
        env={**os.environ, "SKIFF_DATA_DIR": str(data_dir), "SKIFF_SERVER": "",
             **(env or {})})


@contextlib.contextmanager
def skiff_up(data_dir: Path, *, nodes: int = 1, config: str = "") -> Iterator[Path]:
    """`skiff up --detach` in `data_dir` (with `config` as its config file), then `skiff
    down` whatever happens: the data dir, its kubeconfig included."""
    args = ["up", "--detach", "--nodes", str(nodes)]
    if config:
        (data_dir / "config.yaml").write_text(config)
        args += ["--config", str(data_dir / "config.yaml")]
    up = skiff(data_dir, *args)
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        yield data_dir
    finally:
        skiff(data_dir, "down")
