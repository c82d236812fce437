"""A small WebSocket client (RFC 6455) on the standard library: text frames of JSON, as SPACE's
streams use them. Client frames are masked; pings are answered; a close ends the stream."""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import ssl
import struct
import urllib.parse

from .errors import SpaceClientError, api_error, tls_failed, unreachable

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#: The largest frame accepted from the server (SPACE's streams send at most 1 MiB per message).
_MAX_FRAME = 4 * 1024 * 1024


class WebSocket:
    """`url`: http:// or https:// (TLS, verified by `tls`: the system's trusted CAs unless given another context)."""

    def __init__(self, url: str, path: str, api_key: str, timeout: float, tls: ssl.SSLContext | None = None) -> None:
        parts = urllib.parse.urlsplit(url)
        secure = parts.scheme == "https"
        host = parts.hostname or "127.0.0.1"
        try:
            sock = socket.create_connection((host, parts.port or (443 if secure else 80)), timeout=timeout)
        except OSError as err:
            raise unreachable(url, err) from err
        try:
            self._sock = (tls or ssl.create_default_context()).wrap_socket(sock, server_hostname=host) if secure else sock
        except OSError as err:
            sock.close()
            raise tls_failed(url, err) from err
        self._buffer = b""
        self._close_sent = False
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {parts.path.rstrip('/')}{path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {api_key}\r\n\r\n"
        )
        self._sock.sendall(request.encode())
        head = self._read_until(b"\r\n\r\n", 64 * 1024)
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ")[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines if line)}
        if status != 101:
            length = int(headers.get("content-length", "0") or 0)
            body = self._read_exactly(min(length, 64 * 1024)) if length else b""
            self._sock.close()
            raise api_error(status, body, headers.get("x-request-id"), headers.get("retry-after"))
        accept = base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()
        if headers.get("sec-websocket-accept") != accept:
            self._sock.close()
            raise SpaceClientError("PROTOCOL", "the server's WebSocket handshake did not answer this client's key")
        self._sock.settimeout(None)

    def send_text(self, text: str) -> None:
        payload = text.encode()
        mask = os.urandom(4)
        header = bytes([0x81])
        n = len(payload)
        header += bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack("!H", n) if n < 65536 else bytes([0x80 | 127]) + struct.pack("!Q", n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self._sock.sendall(header + mask + masked)

    def receive_text(self) -> str | None:
        """The next text message; None once the server closed the stream (or the connection dropped)."""
        message = b""
        try:
            while True:
                first, second = self._read_exactly(2)
                opcode, length = first & 0x0F, second & 0x7F
                if length == 126:
                    (length,) = struct.unpack("!H", self._read_exactly(2))
                elif length == 127:
                    (length,) = struct.unpack("!Q", self._read_exactly(8))
                if length > _MAX_FRAME:
                    raise SpaceClientError("PROTOCOL", f"the server sent a frame of {length} bytes")
                mask = self._read_exactly(4) if second & 0x80 else None
                data = self._read_exactly(length)
                if mask:
                    data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
                if opcode == 0x8:
                    return None
                if opcode == 0x9:
                    self._control(0xA, data)
                    continue
                if opcode == 0xA:
                    continue
                message += data
                if first & 0x80:
                    return message.decode("utf-8", "replace")
        except (OSError, ConnectionError):
            return None

    def close_write(self) -> None:
        """Sends the close frame and keeps reading: the server's own close (and what it sent before) still arrives."""
        if not self._close_sent:
            self._close_sent = True
            try:
                self._control(0x8, struct.pack("!H", 1000))
            except OSError:
                pass

    def close(self) -> None:
        self.close_write()
        self._sock.close()

    def _control(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        self._sock.sendall(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _read_until(self, marker: bytes, limit: int) -> bytes:
        while marker not in self._buffer:
            if len(self._buffer) > limit:
                raise SpaceClientError("PROTOCOL", "the server's handshake reply is too long")
            chunk = self._sock.recv(65536)
            if not chunk:
                raise SpaceClientError("NETWORK", "the server closed the connection during the handshake")
            self._buffer += chunk
        head, _, self._buffer = self._buffer.partition(marker)
        return head

    def _read_exactly(self, n: int) -> bytes:
        while len(self._buffer) < n:
            chunk = self._sock.recv(max(65536, n - len(self._buffer)))
            if not chunk:
                raise ConnectionError("closed")
            self._buffer += chunk
        data, self._buffer = self._buffer[:n], self._buffer[n:]
        return data
