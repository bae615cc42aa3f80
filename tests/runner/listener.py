"""A listener standing for something a sandboxed child must not reach: a TCP server on loopback
(the broker) or a Unix socket (a host service's), recording every connection made to it."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path


class Listener:
    """A TCP listener on 127.0.0.1 standing for the broker, or (``path``) a Unix socket standing
    for a host service's (a database's, Docker's); counts connections and what they sent."""

    def __init__(self, path: Path | None = None) -> None:
        if path is None:
            self.sock = socket.socket()
            self.sock.bind(("127.0.0.1", 0))
            self.port = self.sock.getsockname()[1]
        else:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.bind(str(path))
            os.chmod(path, 0o777)  # anyone may connect, as to a host service's socket
        self.path = path
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.connections: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            conn.settimeout(0.5)
            try:
                data = conn.recv(4096)
            except OSError:
                data = b""
            self.connections.append(data)
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()
        if self.path is not None:
            self.path.unlink(missing_ok=True)
