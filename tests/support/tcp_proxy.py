"""A loopback TCP proxy a test can cut and restore: a database that goes away and comes back,
without stopping the shared server other tests use."""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

from tests.support.helpers import unavailable


class SwitchableProxy:
    """127.0.0.1:<port> -> target. cut(): every connection is dropped and new ones are closed
    at once (a dead database that fails fast); stall() and hang(): a peer that takes every
    byte and answers nothing; restore(): forwarding again (to new connections)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.down = threading.Event()
        self.closed = threading.Event()
        self._frozen: set[socket.socket] = set()  # stall(): kept open, never forwarded again
        self.hung = False  # hang(): new connections are accepted and held, never answered
        self.held: list[socket.socket] = []
        self._lock = threading.Lock()
        self._live: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.down.is_set():
                client.close()
                continue
            if self.hung:
                with self._lock:
                    self.held.append(client)  # kept open, never answered
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._live += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while not self.down.is_set():
                if a in self._frozen:  # a peer that acknowledges everything, answers nothing
                    self.closed.wait(0.05)
                    continue
                ready, _, _ = select.select([a, b], [], [], 0.2)
                if a in self._frozen:  # stall() came while waiting: these bytes stay unread
                    continue
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def cut(self) -> None:
        self.down.set()
        with self._lock:
            live, self._live = self._live, []
        for s in live:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stall(self) -> None:
        """Every connection open now stays open, its bytes taken by the kernel, and nothing is
        forwarded either way any more (a hung sidecar, pooler or NAT box); new connections are
        forwarded as before."""
        with self._lock:
            self._frozen.update(self._live)

    def hang(self) -> None:
        """stall(), and every connection made from now on is accepted and never answered (a
        hung server, sidecar or NAT box: no reset, no error, silence)."""
        self.hung = True
        self.stall()

    def resume(self) -> None:
        """The connections stall() froze forward again, what the kernel took meanwhile first
        (the hung peer recovers): a client that gave up on its end is seen closing it, and the
        server's end is closed in turn. Those accepted while hung are closed; new ones reach
        the server."""
        with self._lock:
            self._frozen.clear()
            held, self.held = self.held, []
            self.hung = False
        for client in held:
            client.close()

    def restore(self) -> None:
        """Forward new connections again; the ones a stall froze stay frozen."""
        self.down.clear()
        self.hung = False

    def close(self) -> None:
        self.closed.set()
        self.cut()
        self.listener.close()
        with self._lock:
            held, self.held = self.held, []
        for client in held:
            client.close()


class CountingProxy(SwitchableProxy):
    """A proxy that counts round trips: each burst a client sends after the server last spoke.

    A pipeline (several statements sent before reading) is one burst, so one round trip.
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.turns = 0
        self._counting = threading.Lock()
        super().__init__(target)

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        client_spoke_last = False
        try:
            while not self.down.is_set():
                ready, _, _ = select.select([a, b], [], [], 0.2)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is a and not client_spoke_last:
                        with self._counting:
                            self.turns += 1
                    client_spoke_last = s is a
                    (b if s is a else a).sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass


Proxy = TypeVar("Proxy", bound=SwitchableProxy)
R = TypeVar("R")


def turns(proxy: CountingProxy, attempt: Callable[[], R]) -> tuple[int, R]:
    """The round trips `attempt()` made through `proxy`, and what it returned."""
    before = proxy.turns
    result = attempt()
    return proxy.turns - before, result


def proxied(url: str, default_port: int, kind: type[Proxy]) -> tuple[Proxy, str]:
    """A proxy of `kind` in front of the database of `url`, and the URL that goes through it."""
    parts = urlsplit(url)
    if not parts.hostname or parts.hostname.startswith("/"):
        unavailable("the database is reached over a socket here; the proxy needs TCP")
    proxy = kind((parts.hostname, parts.port or default_port))
    user, at, _ = parts.netloc.rpartition("@")
    netloc = f"{user}{at}127.0.0.1:{proxy.port}"
    return proxy, urlunsplit(parts._replace(netloc=netloc))
