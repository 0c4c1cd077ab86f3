"""Skiff: a small, real Kubernetes control plane.

The `skiff` package is the library every service shares: object types and validation
(`skiff.api`), the wire protocol (`skiff.rpc`), the API client with informers
(`skiff.client`), tracing (`skiff.tracing`), the launcher (`skiff.cluster`) and the command
line (`skiff.cli`).
"""

__version__ = "0.1.0"
