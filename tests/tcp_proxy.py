"""A loopback TCP proxy a test can cut and restore: a database that goes away and comes back,
without stopping the shared server other tests use."""

from __future__ import annotations

import select
import socket
import threading


class SwitchableProxy:
    """127.0.0.1:<port> -> target. cut(): every connection is dropped and new ones are closed
    at once (a dead database that fails fast); restore(): forwarding again."""

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

    def restore(self) -> None:
        self.down.clear()

    def close(self) -> None:
        self.closed.set()
        self.cut()
        self.listener.close()


class HangingProxy(SwitchableProxy):
    """hang(): the database hangs. Open connections stop being forwarded, new ones are accepted
    and never answered (no reset, no error: silence). resume(): the open connections forward
    again, new ones reach the server, and those accepted while hung are closed."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.hung = threading.Event()
        self.held: list[socket.socket] = []
        super().__init__(target)

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.hung.is_set():
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

    def hang(self) -> None:
        self.hung.set()
        self.stall()

    def resume(self) -> None:
        with self._lock:
            self._frozen.clear()
            held, self.held = self.held, []
            self.hung.clear()
        for client in held:
            client.close()

    def close(self) -> None:
        super().close()
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
