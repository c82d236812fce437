"""A cell's output on its way to the caller, held to the protocol's bounds, and the errors a cell can end with.

Part of SPACE's code interpreter server (space-code-server.py, beside it in the sandbox's runtime directory).
"""

import json
import re
import time

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# The output a cell keeps for its context's history (the console's notebook view).
HISTORY_CELL_BYTES = 512 * 1024


class ClientGone(Exception):
    """The caller went away: its cell is interrupted."""


class Cell:
    """One cell's output on its way to the caller, held to the per-event and per-cell caps."""

    def __init__(self, write, limits):
        self.write, self.limits = write, limits
        self.kept, self.kept_bytes = [], 0
        self.sent = 0
        self.cut = False
        self.buffers = {"stdout": [], "stderr": []}
        self.buffered = 0

    def emit(self, event):
        line = json.dumps(event, ensure_ascii=True, separators=(",", ":")) + "\n"
        self.keep(event, len(line))
        self.write(line.encode("ascii"))

    def keep(self, event, size):
        """The cell's events for its history, up to HISTORY_CELL_BYTES; past it one notice (errors and the end always)."""
        if self.kept_bytes + size <= HISTORY_CELL_BYTES or event["type"] in ("error", "end"):
            self.kept.append(event)
            self.kept_bytes += size
        elif self.kept_bytes <= HISTORY_CELL_BYTES:
            self.kept.append({"type": "stderr", "text": "[space: the rest of this cell's output is not kept in its history]\n"})
            self.kept_bytes = HISTORY_CELL_BYTES + 1

    def stream(self, name, text):
        if self.cut or not text:
            return
        self.buffers[name].append(text)
        self.buffered += len(text)
        if self.buffered >= self.limits["maxCodeStreamChunkBytes"]:
            self.flush()

    def flush(self):
        for name, parts in self.buffers.items():
            if not parts:
                continue
            text = "".join(parts)
            parts.clear()
            chunk = self.limits["maxCodeStreamChunkBytes"]
            for start in range(0, len(text), chunk):
                if not self.count(min(chunk, len(text) - start)):
                    break
                self.emit({"type": name, "text": text[start : start + chunk]})
        self.buffered = 0

    def result(self, data, is_main):
        self.flush()
        if self.cut:
            return
        data = self.fit(data)
        size = sum(len(v) if isinstance(v, str) else len(json.dumps(v)) for v in data.values())
        if self.count(size):
            self.emit({"type": "result", "isMainResult": is_main, "data": data})

    def fit(self, data):
        """A bundle whose entries pass the event cap loses them, with a note in its text/plain."""
        cap = self.limits["maxCodeEventBytes"] - 4096
        kept, dropped = {}, []
        for mime, value in data.items():
            size = len(value) if isinstance(value, str) else len(json.dumps(value))
            if size > cap or sum(len(str(v)) for v in kept.values()) + size > cap:
                dropped.append(f"{mime} of {size} bytes")
            else:
                kept[mime] = value
        if dropped:
            note = f"[space: {', '.join(dropped)} dropped: a result holds at most {cap} bytes]"
            kept["text/plain"] = (str(kept.get("text/plain", "")) + "\n" + note).strip()
        return kept

    def error(self, name, value, traceback):
        self.flush()
        lines = [ANSI_ESCAPE.sub("", line)[:16384] for line in traceback[:200]]
        self.emit({"type": "error", "name": str(name)[:1024], "value": str(value)[:16384], "traceback": lines})

    def end(self, context_id, count, started):
        self.flush()
        self.emit({"type": "end", "contextId": context_id, "executionCount": count, "durationMs": int((time.monotonic() - started) * 1000)})

    def count(self, size):
        """Whether `size` more bytes fit in the cell's output; past the cap, one notice and nothing more."""
        if self.sent + size <= self.limits["maxCellOutputBytes"]:
            self.sent += size
            return True
        self.cut = True
        for parts in self.buffers.values():
            parts.clear()
        self.emit({"type": "stderr", "text": f"\n[space: this cell's output passed {self.limits['maxCellOutputBytes']} bytes; the rest is not sent]\n"})
        return False
