"""`python -m skiff.controller_manager` (console script `skiff-controller-manager`)."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

from skiff.client.credentials import ENV_CA, ENV_CERT, ENV_KEY, ENV_TOKEN, Credentials
from skiff.cluster.state import ClusterState, default_data_dir
from skiff.controller_manager.app import ControllerManager
from skiff.controller_manager.settings import ControllerManagerSettings, parse_settings
from skiff.service import run_service
from skiff.settings import SettingsError


def use_kubeconfig(path: str) -> None:
    """--kubeconfig: every client of this process (controllers, leader election) proves
    that kubeconfig's user, through the environment each ApiClient reads."""
    if not Path(path).is_file():
        raise SettingsError(f"--kubeconfig: {path}: no such file")
    for key in (ENV_CA, ENV_CERT, ENV_KEY, ENV_TOKEN):
        os.environ.pop(key, None)
    os.environ.update(Credentials.from_kubeconfig(Path(path)).to_env())


def find_apiserver(settings: ControllerManagerSettings) -> ControllerManagerSettings:
    """No --apiserver: the cluster the skiff CLI would talk to, so a controller started
    beside it (`skiff explore --controller`) needs only its kubeconfig."""
    if settings.apiserver:
        return settings
    state = ClusterState.load(default_data_dir())
    found = os.environ.get("SKIFF_SERVER") or (state.api if state else "") or "127.0.0.1:6443"
    return dataclasses.replace(settings, apiserver=found)


def main(argv: list[str] | None = None) -> None:
    settings = find_apiserver(parse_settings(argv))
    try:
        if settings.kubeconfig:
            use_kubeconfig(settings.kubeconfig)
        manager = ControllerManager(settings=settings)
    except (SettingsError, ValueError) as err:
        sys.exit(f"skiff-controller-manager: {err}")
    health = (f"{settings.health_bind_address}:{settings.health_port}"
              if settings.health_port else "")
    run_service("controller-manager", manager.run, health_address=health,
                log_level=settings.log_level)


if __name__ == "__main__":
    main()
