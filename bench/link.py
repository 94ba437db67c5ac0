"""A network link on loopback: a TCP proxy that delays every byte by a stated one-way delay.

An app reaches its database over a network, where a round trip costs 0.3-1 ms in one zone and
more across zones; on loopback it costs about 40 us, so what a saved round trip is worth cannot
be seen there. `LatencyProxy` starts this module as a process of its own (its threads must not
share the bench's interpreter: they would take CPU and the GIL from the side being measured)
listening on 127.0.0.1 and connecting only to 127.0.0.1. Each chunk read from one side is sent
on to the other `delay` seconds after it arrived, in order, so a round trip gains twice the
delay and a pipeline of statements sent in one burst gains it once. Both sides of a figure go
through the same proxy in the same run; `select_one` measures what the link's round trip really
is (the stated delay plus the proxy's own time).

    python -m bench.link --delay-ms 0.5 --target 127.0.0.1:5432   # prints the port it listens on
"""

from __future__ import annotations

import argparse
import collections
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
from typing import Any

LOOPBACK = "127.0.0.1"


def _pump(client: socket.socket, server: socket.socket, delay: float) -> None:
    """Forward both ways, each chunk held until `delay` after it was read."""
    pending: dict[socket.socket, collections.deque[tuple[float, bytes]]] = {
        client: collections.deque(),
        server: collections.deque(),
    }  # by destination
    peer = {client: server, server: client}
    sel = selectors.SelectSelector()  # microseconds: epoll waits in whole ms
    for s in (client, server):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sel.register(s, selectors.EVENT_READ)
    try:
        while True:
            now = time.monotonic()
            for dest, queue in pending.items():
                while queue and queue[0][0] <= now:
                    dest.sendall(queue.popleft()[1])
            due = [q[0][0] for q in pending.values() if q]
            timeout = max(0.0, min(due) - time.monotonic()) if due else None
            for key, _ in sel.select(timeout):
                s: socket.socket = key.fileobj  # type: ignore[assignment]
                data = s.recv(65536)
                if not data:
                    return
                pending[peer[s]].append((time.monotonic() + delay, data))
    except OSError:
        pass
    finally:
        sel.close()
        for s in (client, server):
            s.close()


def _end_with_parent() -> None:
    """Exit when the bench that started this process goes (its end of our stdin closes)."""
    sys.stdin.buffer.read()
    os._exit(0)


def serve(target_port: int, delay: float) -> None:
    """Listen on 127.0.0.1, print the port, forward each connection to 127.0.0.1:target_port."""
    threading.Thread(target=_end_with_parent, daemon=True).start()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((LOOPBACK, 0))
    listener.listen(128)
    print(listener.getsockname()[1], flush=True)
    while True:
        client, _ = listener.accept()
        try:
            server = socket.create_connection((LOOPBACK, target_port), timeout=10)
        except OSError:
            client.close()
            continue
        server.settimeout(None)
        threading.Thread(target=_pump, args=(client, server, delay), daemon=True).start()


class LatencyProxy:
    """The proxy process in front of 127.0.0.1:`target_port`, adding `delay_ms` each way."""

    def __init__(self, target_port: int, delay_ms: float) -> None:
        self.delay_ms = delay_ms
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.link",
                "--delay-ms",
                str(delay_ms),
                "--target-port",
                str(target_port),
            ],
            stdin=subprocess.PIPE,  # closed when the bench ends, however it ends
            stdout=subprocess.PIPE,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            text=True,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()

    def __enter__(self) -> LatencyProxy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def through(url: str, port: int) -> str:
    """`url` with its host and port replaced by the proxy's (its user and database kept)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.hostname not in (LOOPBACK, "localhost"):
        raise SystemExit(f"the link proxy only connects to {LOOPBACK}, not {parts.hostname}")
    auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{auth}{LOOPBACK}:{port}"))


def select_one(url: str, n: int = 300) -> float:
    """The median `SELECT 1` round trip through `url` (PostgreSQL), in seconds."""
    import statistics

    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(20):
            conn.execute("SELECT 1").fetchone()
        samples = []
        for _ in range(n):
            start = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.link", description=__doc__)
    parser.add_argument("--delay-ms", type=float, required=True, help="one-way delay")
    parser.add_argument("--target-port", type=int, required=True, help="on 127.0.0.1")
    args = parser.parse_args()
    serve(args.target_port, args.delay_ms / 1000)


if __name__ == "__main__":
    main()
