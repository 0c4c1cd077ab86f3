"""The cluster the e2e tests drive: `skiff up --detach` with one node (pods run), as a user
starts it, and the kubeconfig it writes; `skiff down` when the module is done."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.skiffcli import skiff_up


@pytest.fixture(scope="module")
def skiff_kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    assert shutil.which("kubectl"), (
        "kubectl is not installed: .ci/run installs Debian's kubernetes-client")
    with skiff_up(tmp_path_factory.mktemp("skiff-up"), nodes=1) as data_dir:
        yield data_dir / "kubeconfig"
