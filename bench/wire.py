"""A loopback TCP proxy that counts round trips: each burst a client sends after the server
last spoke is one (a pipeline of several statements, sent before reading, is one)."""

from __future__ import annotations

import select
import socket
import threading


class CountingProxy:
    """127.0.0.1:<port> -> target, counting the client's turns over every connection."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.turns = 0
        self._mutex = threading.Lock()
        self._closed = threading.Event()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                return
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        client_spoke_last = False
        try:
            while not self._closed.is_set():
                ready, _, _ = select.select([client, server], [], [], 0.2)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is client and not client_spoke_last:
                        with self._mutex:
                            self.turns += 1
                    client_spoke_last = s is client
                    (server if s is client else client).sendall(data)
        except OSError:
            pass
        finally:
            client.close()
            server.close()

    def close(self) -> None:
        self._closed.set()
        self.listener.close()
