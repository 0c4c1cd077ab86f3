"""An HTTPS server on 127.0.0.1 in a thread of its own, with a certificate from a test CA,
for the tests whose apiserver calls out: admission and conversion webhooks (SPEC EX5, EX6).
The tests run kubectl blocking, so the server cannot share their event loop. A subclass
adds its routes in `routes`; `ca_bundle` is what a configuration's `caBundle` carries."""

from __future__ import annotations

import asyncio
import base64
import ssl
import threading
from pathlib import Path
from typing import Self

from aiohttp import web

from skiff.cluster.processes import free_port
from skiff.pki import CertificateAuthority


class HttpsServer:
    """Serves `routes(app)` over HTTPS for `hosts` (127.0.0.1 always)."""

    def __init__(self, directory: Path, *, hosts: tuple[str, ...] = (),
                 common_name: str = "webhook", client_ca: Path | None = None) -> None:
        """`client_ca`: only clients with a certificate it signed get in (an extension
        apiserver admits only the front proxy)."""
        self.ca = CertificateAuthority.load_or_create(directory / "ca")
        files = self.ca.issue(directory / "server", common_name=common_name,
                              hosts=["127.0.0.1", *hosts], server=True)
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(files.cert, files.key)
        if client_ca is not None:
            self._context.verify_mode = ssl.CERT_REQUIRED
            self._context.load_verify_locations(str(client_ca))
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.files.cert.read_bytes()).decode()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def routes(self, app: web.Application) -> None:
        """Add the server's handlers."""

    def start(self) -> Self:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)
        return self

    def resume(self) -> None:
        """Serve again after `stop_serving`."""
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)

    def stop_serving(self) -> None:
        """Stop answering (the port closes); the thread stays for `resume`."""
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._runner = None

    def stop(self) -> None:
        self.stop_serving()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _serve(self) -> None:
        app = web.Application()
        self.routes(app)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port,
                          ssl_context=self._context).start()
