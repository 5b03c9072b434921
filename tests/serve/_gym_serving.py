"""Serve an env with our ``EnvServer`` from synchronous test code (the gymnasium adapters are sync).

    with serving(GymVectorEnv.make("CartPole-v1")) as server:
        env = connect_gym_env(server.address)

The server runs on an event loop in a thread of its own, bound to 127.0.0.1 on a free port;
leaving the block stops it, closes the served env and ends the thread, each wait bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from rlmesh_gym.serve import EnvServer

TIMEOUT = 30.0


class ServedEnv:
    """A running server: its ``address`` and a way to await things on its loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.server: EnvServer
        self.address = ""

    def run(self, coroutine: Any) -> Any:
        """Await ``coroutine`` on the server's loop (bounded)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(TIMEOUT)

    def wait_idle(self) -> bool:
        """Whether the session ended (the client closed it) within the bound."""
        return self.run(self.server.wait_idle(TIMEOUT))


@contextlib.contextmanager
def serving(env: Any, **server_kwargs: Any) -> Iterator[ServedEnv]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="test-env-server", daemon=True)
    thread.start()
    try:
        served = ServedEnv(loop)

        async def start() -> EnvServer:
            server = EnvServer(env, **server_kwargs)
            await server.start()
            return server

        server = served.server = served.run(start())
        served.address = server.address
        try:
            yield served
        finally:
            served.run(server.stop())
            served.run(env.close(5.0))
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(TIMEOUT)
        loop.close()
