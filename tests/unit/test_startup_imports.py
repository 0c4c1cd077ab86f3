"""What a process pays to start: `skiff up` asks whether each service is installed without
importing it (the kubelet's and the controller-manager's packages import most of their
service), and services that never evaluate CEL do not load its runtime (a cluster starts
a dozen Python processes, and a test suite thousands)."""

from __future__ import annotations

import json
import subprocess
import sys

from skiff.cluster.launch import service_available


def test_every_service_of_a_cluster_is_found() -> None:
    for module in ("skiff.apiserver", "skiff.scheduler", "skiff.controller_manager",
                   "skiff.kubelet", "skiff.fence_agent", "skiff.cluster.controlplane"):
        assert service_available(module), module


def test_a_missing_service_or_a_module_without_main_is_not_found() -> None:
    assert not service_available("skiff.no_such_service")
    assert not service_available("no_such_package.service")
    assert not service_available("skiff.api")  # a package, but not runnable with -m


def _loaded_after(code: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules under `prefixes` a fresh interpreter has loaded after running `code`."""
    report = ("import json, sys\n"
              f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))")
    out = subprocess.run([sys.executable, "-c", code + "\n" + report], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    return list(json.loads(out))


def test_asking_imports_no_service() -> None:
    code = ("from skiff.cluster.launch import service_available\n"
            "assert service_available('skiff.kubelet')\n"
            "assert service_available('skiff.controller_manager')\n")
    assert _loaded_after(code, ("skiff.kubelet", "skiff.controller_manager")) == []


def test_services_that_never_run_cel_do_not_load_it() -> None:
    code = ("import skiff.scheduler.__main__, skiff.controller_manager.__main__\n"
            "import skiff.kubelet.__main__, skiff.fence_agent.__main__\n")
    assert _loaded_after(code, ("cel_expr_python", "skiff.api.cel",
                                "skiff.api.apiextensions.cel")) == []
