"""`/healthz`, `/livez`, `/readyz` answered as kube-apiserver answers them."""

from __future__ import annotations

from skiff.apiserver.endpoints.healthz import HealthChecks


def test_cp2_readyz_is_a_plain_ok_and_lists_its_checks_when_verbose() -> None:
    checks = HealthChecks()
    assert checks.answer("readyz", "", {}).body == "ok"
    verbose = checks.answer("readyz", "", {"verbose": ""})
    assert verbose.status == 200
    assert str(verbose.body).splitlines() == [
        "[+]ping ok", "[+]log ok", "[+]etcd ok", "[+]etcd-readiness ok",
        "[+]informer-sync ok", "[+]shutdown ok", "readyz check passed"]


def test_cp2_a_failed_check_is_500_naming_it_and_exclude_skips_it() -> None:
    checks = HealthChecks()
    checks.set("shutdown", False)
    failed = checks.answer("readyz", "", {})
    assert failed.status == 500
    assert "[-]shutdown failed: reason withheld" in str(failed.body)
    assert str(failed.body).endswith("readyz check failed\n")
    assert checks.answer("livez", "", {}).status == 200  # shutdown is readiness only
    assert checks.answer("readyz", "", {"exclude": "shutdown"}).status == 200
    assert checks.answer("readyz", "shutdown", {}).status == 500
    assert checks.answer("readyz", "ping", {}).body == "ok"
    assert checks.answer("readyz", "nope", {}).status == 404


def test_cp2_losing_etcd_fails_health_liveness_and_readiness() -> None:
    checks = HealthChecks()
    checks.etcd(False)
    assert {e: checks.answer(e, "", {}).status for e in ("healthz", "livez", "readyz")} == {
        "healthz": 500, "livez": 500, "readyz": 500}
    checks.etcd(True)
    assert checks.answer("readyz", "etcd-readiness", {}).status == 200
