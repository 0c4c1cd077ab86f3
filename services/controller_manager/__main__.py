"""`python -m skiff.controller_manager` (console script `skiff-controller-manager`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from skiff.client.credentials import ENV_CA, ENV_CERT, ENV_KEY, ENV_TOKEN
from skiff.cluster.kubeconfig import cli_credentials
from skiff.controller_manager.app import ControllerManager
from skiff.controller_manager.settings import parse_settings
from skiff.service import run_service
from skiff.settings import SettingsError


def use_kubeconfig(path: str) -> None:
    """--kubeconfig: every client of this process (controllers, leader election) proves
    that kubeconfig's user, through the environment each ApiClient reads."""
    if not Path(path).is_file():
        raise SettingsError(f"--kubeconfig: {path}: no such file")
    for key in (ENV_CA, ENV_CERT, ENV_KEY, ENV_TOKEN):
        os.environ.pop(key, None)
    os.environ.update(cli_credentials(Path(path)).to_env())


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(argv)
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
