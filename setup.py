"""Package list for setuptools: `skiff` from shared/, `skiff.<service>` from services/.

pyproject.toml's `package-dir` maps the roots; this adds every subpackage under them
(e.g. skiff.scheduler.plugins.podtopologyspread), which `packages.find` cannot derive
through that mapping. Metadata stays in pyproject.toml.
"""

from pathlib import Path

from setuptools import find_packages, setup

packages = ["skiff", *(f"skiff.{p}" for p in find_packages("shared/skiff"))]
for service in sorted(p.name for p in Path("services").iterdir()
                      if (p / "__init__.py").exists()):
    packages.append(f"skiff.{service}")
    packages += [f"skiff.{service}.{p}" for p in find_packages(f"services/{service}")]

setup(packages=packages)
