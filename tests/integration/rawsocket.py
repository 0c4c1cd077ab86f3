"""A raw client socket's view of a server hanging up: what arrived before the server closed
the connection, and how long that took. The header-timeout tests (SPEC AU10) send headers
slowly or not at all, over HTTP and HTTPS, and time the cut with it."""

from __future__ import annotations

import socket
import ssl
import time


def read_until_closed(sock: socket.socket, limit: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and the seconds that
    took (infinity if `limit` passed first). A reset, or a TLS connection closed without a
    close_notify, is closed all the same."""
    started, data = time.monotonic(), b""
    sock.settimeout(limit)
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        return data, float("inf")
    except (ConnectionResetError, ssl.SSLError):
        pass
    return data, time.monotonic() - started
