"""`python -m skiff.controller_manager` (console script `skiff-controller-manager`)."""

from __future__ import annotations

import sys

from skiff.controller_manager.app import ControllerManager
from skiff.controller_manager.settings import parse_settings
from skiff.service import run_service
from skiff.settings import SettingsError


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(argv)
    try:
        manager = ControllerManager(settings=settings)
    except (SettingsError, ValueError) as err:
        sys.exit(f"skiff-controller-manager: {err}")
    health = (f"{settings.health_bind_address}:{settings.health_port}"
              if settings.health_port else "")
    run_service("controller-manager", manager.run, health_address=health,
                log_level=settings.log_level)


if __name__ == "__main__":
    main()
