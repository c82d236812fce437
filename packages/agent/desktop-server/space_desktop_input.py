"""Input on the desktop's display: pointer and keyboard through xdotool, every argument checked
first (coordinates against the screen, keys against X's keysyms). Part of the desktop server."""

import ctypes
import ctypes.util

from space_unix_http import validation

MAX_TEXT = 10000
# xdotool's names for the modifiers of a chord, besides keysyms (Control_L…) themselves.
MODIFIERS = {"ctrl", "control", "alt", "shift", "super", "meta"}
# Common names agents use for keys, as X keysyms.
KEY_ALIASES = {
    "enter": "Return",
    "return": "Return",
    "esc": "Escape",
    "escape": "Escape",
    "tab": "Tab",
    "space": "space",
    "backspace": "BackSpace",
    "delete": "Delete",
    "del": "Delete",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    "home": "Home",
    "end": "End",
    "pageup": "Prior",
    "pagedown": "Next",
    "insert": "Insert",
    "cmd": "super",
    "win": "super",
    "windows": "super",
    "option": "alt",
}
BUTTONS = {"left": "1", "middle": "2", "right": "3"}
SCROLL_BUTTONS = {"up": "4", "down": "5", "left": "6", "right": "7"}


class Keysyms:
    """Key names checked against Xlib's own table: an unknown key is refused, not typed as nothing."""

    def __init__(self):
        name = ctypes.util.find_library("X11")
        self.lib = ctypes.CDLL(name) if name else None
        if self.lib:
            self.lib.XStringToKeysym.argtypes = [ctypes.c_char_p]
            self.lib.XStringToKeysym.restype = ctypes.c_ulong

    def known(self, name):
        if not self.lib:
            return True
        return self.lib.XStringToKeysym(name.encode()) != 0

    def chord(self, chord, field):
        """`ctrl+shift+t` → xdotool's `ctrl+shift+t`, each part a modifier or a keysym."""
        if not isinstance(chord, str) or not chord or len(chord) > 100:
            raise validation(field, "a key chord such as ctrl+c or Return")
        parts = []
        for part in chord.split("+"):
            name = KEY_ALIASES.get(part.lower(), part)
            if name.lower() in MODIFIERS:
                parts.append(name.lower())
            elif len(name) == 1 or self.known(name):
                parts.append(name)
            else:
                raise validation(field, f"unknown key {part!r} (X keysym names: Return, Escape, Tab, F5, a, ...)")
        return "+".join(parts)


def integer(body, field, low, high, default=None):
    value = body.get(field, default)
    if value is None:
        raise validation(field, "required")
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise validation(field, f"an integer from {low} to {high}")
    return value


class Input:
    def __init__(self, display):
        self.display = display
        self.keysyms = Keysyms()

    def point(self, body, required=True):
        """`x`, `y` on the screen; None when both are left out and they may be."""
        if not required and body.get("x") is None and body.get("y") is None:
            return None
        width, height = self.display.size
        return integer(body, "x", 0, width - 1), integer(body, "y", 0, height - 1)

    def move_first(self, body):
        """xdotool's arguments that move the pointer to `x`, `y` first, when given (else none: where it is)."""
        at = self.point(body, required=False)
        return ["mousemove", str(at[0]), str(at[1])] if at else []

    def send(self, body):
        """One input, checked whole before xdotool is run."""
        kind = body.get("type")
        d = self.display
        if kind == "move":
            x, y = self.point(body)
            d.xdotool("mousemove", str(x), str(y))
        elif kind in ("click", "double_click", "down", "up"):
            button = BUTTONS.get(body.get("button", "left"))
            if button is None:
                raise validation("button", "left, middle or right")
            move = self.move_first(body)
            if kind == "click":
                d.xdotool(*move, "click", button)
            elif kind == "double_click":
                d.xdotool(*move, "click", "--repeat", "2", "--delay", "80", button)
            else:
                d.xdotool(*move, "mousedown" if kind == "down" else "mouseup", button)
        elif kind == "drag":
            x, y = self.point(body)
            width, height = d.size
            to_x, to_y = integer(body, "toX", 0, width - 1), integer(body, "toY", 0, height - 1)
            d.xdotool("mousemove", str(x), str(y), "mousedown", "1", "mousemove", str(to_x), str(to_y), "mouseup", "1")
        elif kind == "scroll":
            direction = body.get("direction", "down")
            button = SCROLL_BUTTONS.get(direction)
            if button is None:
                raise validation("direction", "up, down, left or right")
            amount = integer(body, "amount", 1, 100, 1)
            d.xdotool(*self.move_first(body), "click", "--repeat", str(amount), "--delay", "20", button)
        elif kind == "key":
            keys = body.get("keys")
            chords = keys if isinstance(keys, list) else [keys]
            if not chords or len(chords) > 50:
                raise validation("keys", "a key chord or a list of at most 50")
            d.xdotool("key", "--clearmodifiers", "--delay", "20", *[self.keysyms.chord(c, "keys") for c in chords])
        elif kind == "type":
            text = body.get("text")
            if not isinstance(text, str) or not text:
                raise validation("text", "a non-empty string")
            if len(text) > MAX_TEXT:
                raise validation("text", f"at most {MAX_TEXT} characters")
            delay = integer(body, "delayMs", 0, 1000, 12)
            d.xdotool("type", "--clearmodifiers", "--delay", str(delay), "--", text)
        else:
            raise validation("type", "move, click, double_click, down, up, drag, scroll, key or type")
        return {"ok": True}

