"""Defect: `skiff up` run where the working directory holds a folder named `skiff` (a
checkout's parent, or `SKIFF_DATA_DIR=./skiff`) started every component with that folder
shadowing the installed package ("cannot import name ... from 'skiff.pki' (unknown
location)"). Components now start with `python -P`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from skiff.cluster.processes import python_module


def test_components_start_where_the_working_directory_has_a_skiff_folder(
        tmp_path: Path) -> None:
    (tmp_path / "skiff" / "pki").mkdir(parents=True)  # a data dir's own pki/ folder
    started = subprocess.run([*python_module("skiff.apiserver"), "--help"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
    assert started.returncode == 0, started.stderr
    assert "--etcd-servers" in started.stdout
