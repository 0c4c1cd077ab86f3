"""`python -m skiff.scheduler` / `skiff-scheduler`."""

from __future__ import annotations

import sys

from skiff.scheduler.app import main

if __name__ == "__main__":
    sys.exit(main())
