"""Third-party suites and tools run unchanged against a cluster `skiff up` started: kopf's
own e2e suite at its release tag and the real Helm CLI. Apart from tests/integration because
what they run comes from PyPI at test time (cached under build/), not from Skiff."""
