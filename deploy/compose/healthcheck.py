"""Health probe for the compose cluster's containers: exit 0 when the component is healthy.

Docker runs a health check inside the container, so this file ships in the image and runs
with the image's Python; it needs only the standard library and, for gRPC, the grpcio and
grpcio-health-checking that Skiff already installs.

    python3 /opt/skiff/healthcheck.py grpc 127.0.0.1:10259  # grpc.health.v1 says SERVING
    python3 /opt/skiff/healthcheck.py grpcs 127.0.0.1:6443  # the same over TLS
    python3 /opt/skiff/healthcheck.py http http://127.0.0.1:2381/health   # 2xx (etcd metrics)

Anything else -- refused, timed out, NOT_SERVING, an error status -- prints one line saying
what failed and exits 1, which is what `docker inspect` shows in the health log.
"""

from __future__ import annotations

import os
import sys
import urllib.request
from pathlib import Path
from typing import Any

TIMEOUT_SECONDS = 3.0
ENV_FILES = ("SKIFF_CA_FILE", "SKIFF_CLIENT_CERT_FILE", "SKIFF_CLIENT_KEY_FILE")


def _channel(target: str, tls: bool) -> Any:
    """Plaintext, or TLS with the container's own files: the CA, client certificate
    and key its component uses (SKIFF_CA_FILE, SKIFF_CLIENT_CERT_FILE, SKIFF_CLIENT_KEY_FILE)."""
    import grpc

    if not tls:
        return grpc.insecure_channel(target)
    files = [os.environ.get(v, "") for v in ENV_FILES]
    if not all(files):
        raise OSError(f"grpcs needs {', '.join(ENV_FILES)} in the environment")
    ca, cert, key = (Path(f).read_bytes() for f in files)
    return grpc.secure_channel(target, grpc.ssl_channel_credentials(
        root_certificates=ca, private_key=key, certificate_chain=cert))


def check_grpc(target: str, service: str = "", *, tls: bool = False) -> str | None:
    """None when `target` reports SERVING for `service`, else why not."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    try:
        channel = _channel(target, tls)
    except OSError as err:
        return f"gRPC health of {target}: {err}"
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service),
                               timeout=TIMEOUT_SECONDS)
        except grpc.RpcError as err:
            return f"gRPC health of {target}: {err.code().name} {err.details() or ''}".strip()
    status: str = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return None if status == "SERVING" else f"gRPC health of {target}: {status}"


def check_http(url: str) -> str | None:
    """None when `url` answers 2xx, else why not."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as reply:
            code: int = reply.status
    except OSError as err:
        return f"GET {url}: {err}"
    return None if 200 <= code < 300 else f"GET {url}: HTTP {code}"


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("grpc", "grpcs", "http"):
        print("usage: healthcheck.py grpc|grpcs HOST:PORT [SERVICE] | http URL",
              file=sys.stderr)
        return 2
    if argv[0] in ("grpc", "grpcs"):
        problem = check_grpc(argv[1], argv[2] if len(argv) > 2 else "",
                             tls=argv[0] == "grpcs")
    else:
        problem = check_http(argv[1])
    if problem:
        print(problem)
        return 1
    print("healthy")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
