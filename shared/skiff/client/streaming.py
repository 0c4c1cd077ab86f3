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

__all__ = ["EXEC_METHOD", "PORTFORWARD_METHOD", "SERVICE", "exec_call", "portforward_call"]

EXEC_METHOD = f"/{SERVICE}/Exec"


def exec_call(channel: grpc.aio.Channel) -> Any:
    """A new Exec call on `channel`: write request maps, read answer maps (encoded)."""
    return channel.stream_stream(EXEC_METHOD)()


PORTFORWARD_METHOD = f"/{SERVICE}/PortForward"


def portforward_call(channel: grpc.aio.Channel) -> Any:
    """A new PortForward call (SPEC SB4): one TCP connection to a pod's port.

    caller → kubelet: first `{namespace, name, port}`, then `{"data": bytes}` and
    `{"close": true}` (no more data from the caller); kubelet → caller: `{"connected":
    true}` once the pod's port accepted, then `{"data": bytes}` and last `{"eof": true}`.
    A refusal (no such pod, nothing listening) aborts the call with an ApiError."""
    return channel.stream_stream(PORTFORWARD_METHOD)()
