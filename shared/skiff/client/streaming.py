"""pods/exec between the apiserver and the kubelet that runs the pod (SPEC SB4).

One bidirectional gRPC call `/skiff.v1.Kubelet/Exec` on the kubelet's health port (the
port published in `status.daemonEndpoints.kubeletEndpoint.Port`, as for logs). Messages
are msgpack maps:

- caller → kubelet: first `{namespace, name, container, command, stdin, tty}`, then any of
  `{"stdin": bytes}`, `{"stdinClose": true}`, `{"resize": [width, height]}`;
- kubelet → caller: `{"stream": 1|2, "data": bytes}` (stdout, stderr) and last
  `{"exit": code}`. A refusal (no such container, not running) aborts the call with an
  ApiError, like the other Skiff services.
"""

from __future__ import annotations

from typing import Any

import grpc

from skiff.client.logs import SERVICE

__all__ = ["EXEC_METHOD", "SERVICE", "exec_call"]

EXEC_METHOD = f"/{SERVICE}/Exec"


def exec_call(channel: grpc.aio.Channel) -> Any:
    """A new Exec call on `channel`: write request maps, read answer maps (encoded)."""
    return channel.stream_stream(EXEC_METHOD)()
