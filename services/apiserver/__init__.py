"""Skiff's apiserver: the only etcd client; registry, storage, watch cache, gRPC front.

`ApiServer` runs it in-process; `skiff-apiserver` (see `app.main`) is the service.
"""

from skiff.apiserver.app import ApiServer, ApiServerSettings, main

__all__ = ["ApiServer", "ApiServerSettings", "main"]
