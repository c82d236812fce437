"""HTTP on a Unix socket, for the in-sandbox agent's helper servers (the code interpreter's and the
desktop's): the agent is their only client, so they never listen on TCP. Their errors, JSON bodies
and replies, and the server that answers each request on a thread of its own."""

import json
import os
import signal
import socketserver
import sys


class ApiError(Exception):
    """An answer with an error: `{"error": {code, message}}` with its status."""

    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def validation(field, message):
    """A 400 that names the field at fault."""
    return ApiError(400, "VALIDATION_FAILED", f"{field}: {message}")


class JsonRequests:
    """Mixed into a BaseHTTPRequestHandler: a request's JSON body (bounded), a JSON reply, bytes."""

    protocol_version = "HTTP/1.0"

    def log_message(self, format, *args):
        pass

    def body(self, max_bytes):
        length = int(self.headers.get("content-length") or 0)
        if length > max_bytes:
            raise ApiError(413, "PAYLOAD_TOO_LARGE", "request body too large")
        raw = self.rfile.read(length) if length else b"{}"
        try:
            value = json.loads(raw)
        except ValueError:
            raise ApiError(400, "INVALID_JSON", "the body is not JSON")
        if not isinstance(value, dict):
            raise ApiError(400, "VALIDATION_FAILED", "the body must be a JSON object")
        return value

    def reply(self, status, value):
        self.send_bytes(json.dumps(value).encode(), "application/json", status)

    def send_bytes(self, body, content_type, status=200):
        try:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def reply_error(self, error):
        """An ApiError as its answer; anything else is our own bug: INTERNAL, and the server goes on."""
        if isinstance(error, ApiError):
            self.reply(error.status, {"error": {"code": error.code, "message": error.message}})
        else:
            self.reply(500, {"error": {"code": "INTERNAL", "message": f"{type(error).__name__}: {error}"[:2000]}})


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        request, _ = super().get_request()
        return request, ("unix", 0)


def serve(socket_path, handler, name, **attributes):
    """Listens on `socket_path` (only the agent may connect), hands `attributes` to the handlers, serves until SIGTERM."""
    if os.path.exists(socket_path):
        os.unlink(socket_path)
    server = UnixServer(socket_path, handler)
    os.chmod(socket_path, 0o600)
    for key, value in attributes.items():
        setattr(server, key, value)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"{name} ready on {socket_path}", flush=True)
    server.serve_forever()
