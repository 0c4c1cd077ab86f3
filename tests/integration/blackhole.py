"""A loopback TCP proxy that can cut connections the way a network partition does.

`cut()` stops forwarding bytes on every open connection but never closes or resets them
(a partition drops packets; no RST arrives), and refuses nothing. `heal()` forwards again
for connections made from then on; the cut ones stay dead, as TCP state across a long
partition usually is. `drop_answers()` is a failure after the commit: requests on the open
connections still reach the server, its answers are dropped, and a moment later those
connections break; new connections work normally. Only 127.0.0.1 is involved.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from skiff.cluster.processes import free_port


@dataclass(eq=False)
class _Link:
    cut: bool = False  # nothing flows either way
    dropping_answers: bool = False  # requests flow, answers do not
    writers: list[asyncio.StreamWriter] = field(default_factory=list)


class Blackhole:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._links: set[_Link] = set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def __aenter__(self) -> Blackhole:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for link in self._links:
            for w in link.writers:
                w.close()
        with contextlib.suppress(Exception):
            await self._server.wait_closed()

    def cut(self) -> None:
        for link in self._links:
            link.cut = True

    def heal(self) -> None:
        """New connections flow again; the cut ones stay silent forever."""

    def drop_answers(self, *, hold: float = 0.5) -> None:
        """The open connections still carry requests but drop every answer, and `hold`
        seconds later they are aborted (a network failure after the server committed)."""
        links = list(self._links)
        for link in links:
            link.dropping_answers = True

        async def abort() -> None:
            await asyncio.sleep(hold)
            for link in links:
                for w in link.writers:
                    w.transport.abort()
                self._links.discard(link)

        self._spawn(abort())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro, name="grpc-blackhole")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        link = _Link(writers=[writer, up_writer])
        self._links.add(link)
        self._spawn(self._pump(link, reader, up_writer, answers=False))
        self._spawn(self._pump(link, up_reader, writer, answers=True))

    @staticmethod
    async def _pump(link: _Link, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *,
                    answers: bool) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await src.read(65536):
                if link.cut or (answers and link.dropping_answers):
                    continue  # dropped on the floor, like packets across a partition
                dst.write(data)
                await dst.drain()
