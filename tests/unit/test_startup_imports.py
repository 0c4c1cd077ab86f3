"""What a process pays to start: `skiff up` asks whether each service is installed without
importing it (the kubelet's and the controller-manager's packages import most of their
service), and services that never evaluate CEL do not load its runtime (a cluster starts
a dozen Python processes, and a test suite thousands), nor does a CLI command load the
libraries only some of its commands use."""

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


def test_a_skiff_command_does_not_load_netlink() -> None:
    """pyroute2 (~0.1 s of CPU to import) serves only `skiff down`'s sandbox removal and the
    kubelet; `skiff get`, `skiff status` and the rest start without it."""
    assert _loaded_after("import skiff.cli.main\n", ("pyroute2",)) == []


def test_importing_the_api_does_not_load_the_cron_parser() -> None:
    """Every process imports skiff.api (CronJob validation among it); croniter loads when a
    schedule is first read."""
    assert _loaded_after("import skiff.api\n", ("croniter",)) == []
    code = ("import skiff.api\nfrom skiff.api.cronschedule import expression\n"
            "assert expression('*/5 * * * *') == '*/5 * * * *'\n")
    assert "croniter" in _loaded_after(code, ("croniter",))
