"""The kernels of SPACE's code interpreter: IPython over ZMQ's ipc transport, a long-lived bash, a long-lived Node.js.

Part of SPACE's code interpreter server (space-code-server.py, beside it in the sandbox's runtime directory).
Each runs a cell into a `Cell`, returning its execution count (None when the kernel died).
"""

import json
import os
import queue
import select
import signal
import subprocess
import time
import uuid

from space_code_cell import Cell, ClientGone
from space_unix_http import ApiError

STREAM_FLUSH_S = 0.05
INTERRUPT_GRACE_S = 3.0


class PythonKernel:
    """An IPython kernel on ZMQ's ipc transport, with a blocking client of it."""

    language = "python"

    def __init__(self, context_id, cwd, run_dir):
        from jupyter_client import KernelManager

        self.manager = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(run_dir, context_id))
        self.manager.connection_file = os.path.join(run_dir, f"{context_id}.json")
        env = dict(os.environ)
        # Charts as images in the cell's results (IPython's inline backend), not the template's Agg of scripts.
        env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
        self.manager.start_kernel(cwd=cwd, env=env)
        self.client = self.manager.blocking_client()
        self.client.start_channels(shell=True, iopub=True, stdin=False, hb=False, control=True)
        self.client.wait_for_ready(timeout=120)

    def alive(self):
        return self.manager.is_alive()

    def exit_code(self):
        process = getattr(self.manager, "provisioner", None)
        process = getattr(process, "process", None)
        return getattr(process, "returncode", None)

    def shutdown(self):
        try:
            self.client.stop_channels()
        finally:
            self.manager.shutdown_kernel(now=True)

    def interrupt(self):
        self.manager.interrupt_kernel()

    def run(self, code, env, cell, should_stop, deadline):
        """Runs `code`, emitting its output into `cell`; returns the execution count, or None when the kernel died."""
        if env:
            self.quiet("import os as __space_os\n__space_saved_env = {k: __space_os.environ.get(k) for k in %r}\n__space_os.environ.update(%r)" % (list(env), env))
        try:
            return self.execute(code, cell, should_stop, deadline)
        finally:
            if env and self.alive():
                self.quiet("for __k, __v in __space_saved_env.items():\n    (__space_os.environ.pop(__k, None) if __v is None else __space_os.environ.__setitem__(__k, __v))")

    def set_session(self, env, cwd):
        self.quiet("import os as __space_os\n__space_os.environ.update(%r)\n__space_os.chdir(%r)" % (dict(env), cwd))

    def quiet(self, code):
        msg_id = self.client.execute(code, silent=True, store_history=False)
        self.wait_idle(msg_id, time.monotonic() + 10)

    def wait_idle(self, msg_id, until):
        while time.monotonic() < until:
            try:
                msg = self.client.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                if not self.alive():
                    return False
                continue
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                return True
        return False

    def execute(self, code, cell, should_stop, deadline):
        msg_id = self.client.execute(code, store_history=True, allow_stdin=False, stop_on_error=True)
        count = None
        while True:
            stop = should_stop()
            if stop or time.monotonic() > deadline:
                cell.flush()
                self.interrupt()
                if not self.wait_idle(msg_id, time.monotonic() + INTERRUPT_GRACE_S):
                    self.manager.restart_kernel(now=True)
                    self.client.wait_for_ready(timeout=120)
                    cell.error("KernelRestarted", "the cell did not stop on an interrupt; the kernel was restarted and its state is lost", [])
                if stop:
                    raise ClientGone()
                cell.error("TimeoutError", "the cell ran past its timeout and was interrupted", [])
                return count
            try:
                msg = self.client.get_iopub_msg(timeout=STREAM_FLUSH_S)
            except queue.Empty:
                cell.flush()
                if not self.alive():
                    return None
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                cell.stream("stderr" if content.get("name") == "stderr" else "stdout", content.get("text", ""))
            elif kind in ("execute_result", "display_data"):
                cell.result(content.get("data", {}), kind == "execute_result")
            elif kind == "error":
                cell.error(content.get("ename", "Error"), content.get("evalue", ""), content.get("traceback", []))
            elif kind == "execute_input":
                count = content.get("execution_count", count)
            elif kind == "status" and content.get("execution_state") == "idle":
                return count


class ChildKernel:
    """A kernel that is one child process (and its group), talked to over its stdin and stdout: `argv`, started in the context's directory."""

    argv = []

    def __init__(self, context_id, cwd, run_dir):
        self.count = 0
        self.cwd = cwd
        self.start()

    def start(self):
        self.process = subprocess.Popen(self.argv, cwd=self.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)

    def alive(self):
        return self.process.poll() is None

    def exit_code(self):
        return self.process.poll()

    def shutdown(self):
        if self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def interrupt(self):
        os.killpg(self.process.pid, signal.SIGINT)


class BashKernel(ChildKernel):
    """A long-lived bash: variables, functions and the working directory carry over between cells."""

    language = "bash"
    argv = ["bash", "--noprofile", "--norc"]

    def set_session(self, env, cwd):
        self.cwd = cwd
        exports = "".join(f"export {k}={shell_quote(v)}\n" for k, v in env.items())
        self.process.stdin.write(f"{exports}cd {shell_quote(cwd)}\n".encode())
        self.process.stdin.flush()

    def run(self, code, env, cell, should_stop, deadline):
        marker = f"__space_end_{uuid.uuid4().hex}"
        exports = "".join(f"export {k}={shell_quote(v)}\n" for k, v in (env or {}).items())
        script = f"{exports}{code}\n__space_status=$?; printf '\\n{marker} %d\\n' $__space_status; printf '\\n{marker}\\n' >&2\n"
        self.process.stdin.write(script.encode())
        self.process.stdin.flush()
        pending = {self.process.stdout.fileno(): "stdout", self.process.stderr.fileno(): "stderr"}
        tails = {"stdout": b"", "stderr": b""}
        status = None
        while pending:
            if should_stop() or time.monotonic() > deadline:
                # A non-interactive bash ends with its interrupted command: it is started again.
                self.shutdown()
                self.start()
                cell.error("KernelRestarted", "the cell was interrupted; bash was started again and its state is lost", [])
                if should_stop():
                    raise ClientGone()
                return None
            ready, _, _ = select.select(list(pending), [], [], STREAM_FLUSH_S)
            if not ready:
                cell.flush()
                if not self.alive():
                    return None
                continue
            for fd in ready:
                name = pending[fd]
                chunk = os.read(fd, 65536)
                if not chunk:
                    del pending[fd]
                    continue
                data = tails[name] + chunk
                end = data.find(f"\n{marker}".encode())
                if end >= 0:
                    rest = data[end + len(marker) + 1 :]
                    data = data[:end]
                    del pending[fd]
                    if name == "stdout":
                        status = int((rest.split(b"\n", 2)[0] or b"0").strip() or 0)
                    cell.stream(name, data.decode("utf-8", "replace"))
                else:
                    # Keep the bytes a marker could start with for the next read.
                    keep = len(marker) + 1
                    cell.stream(name, data[:-keep].decode("utf-8", "replace") if len(data) > keep else "")
                    tails[name] = data[-keep:] if len(data) > keep else data
        self.count += 1
        if status:
            cell.error("ExitStatus", str(status), [f"the last command exited with status {status}"])
        return self.count


class JavaScriptKernel(ChildKernel):
    """A long-lived Node.js (space-js-kernel.js, beside this file): its global scope carries over between cells."""

    language = "javascript"
    argv = ["node", os.path.join(os.path.dirname(os.path.abspath(__file__)), "space-js-kernel.js")]

    def start(self):
        super().start()
        self.lines = b""
        ready, _, _ = select.select([self.process.stdout], [], [], 60)
        if not ready or b"ready" not in os.read(self.process.stdout.fileno(), 65536):
            self.shutdown()
            raise ApiError(503, "CODE_INTERPRETER_UNAVAILABLE", "the JavaScript context did not start (is node installed in the template?)")


    def set_session(self, env, cwd):
        exports = "".join(f"process.env[{json.dumps(str(k))}] = {json.dumps(str(v))};" for k, v in env.items())
        self.process.stdin.write((json.dumps({"code": f"{exports} process.chdir({json.dumps(cwd)}); undefined"}) + "\n").encode())
        self.process.stdin.flush()
        # What that cell prints goes nowhere: nobody asked for it.
        discard = Cell(lambda _: None, {"maxCellOutputBytes": 1 << 20, "maxCodeStreamChunkBytes": 65536, "maxCodeEventBytes": 1 << 20})
        self.read_until_done(discard, time.monotonic() + 10)

    def run(self, code, env, cell, should_stop, deadline):
        if env:
            code = "".join(f"process.env[{json.dumps(str(k))}] = {json.dumps(str(v))};\n" for k, v in env.items()) + code
        self.process.stdin.write((json.dumps({"code": code}) + "\n").encode())
        self.process.stdin.flush()
        interrupted_at = None
        while True:
            stop = should_stop()
            if (stop or time.monotonic() > deadline) and interrupted_at is None:
                cell.flush()
                self.interrupt()
                interrupted_at = time.monotonic()
            if interrupted_at is not None and time.monotonic() - interrupted_at > INTERRUPT_GRACE_S:
                self.shutdown()
                self.start()
                cell.error("KernelRestarted", "the cell did not stop on an interrupt; Node.js was started again and its state is lost", [])
                if stop:
                    raise ClientGone()
                return None
            done = self.read_until_done(cell, time.monotonic() + STREAM_FLUSH_S, drop_interrupt=interrupted_at is not None)
            if done:
                if interrupted_at is not None and not should_stop():
                    cell.error("TimeoutError", "the cell ran past its timeout and was interrupted", [])
                if should_stop():
                    raise ClientGone()
                self.count += 1
                return self.count
            cell.flush()
            if not self.alive():
                return None

    def read_until_done(self, cell, until, drop_interrupt=False):
        """Relays the kernel's events into `cell` until `until`; True once the cell's `done` came."""
        streams = {self.process.stdout.fileno(): "stdout", self.process.stderr.fileno(): "stderr"}
        while time.monotonic() < until:
            ready, _, _ = select.select(list(streams), [], [], max(0, until - time.monotonic()))
            if not ready:
                return False
            for fd in ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return False
                if streams[fd] == "stderr":
                    # Node's own messages (a crash): shown as the cell's stderr.
                    cell.stream("stderr", chunk.decode("utf-8", "replace"))
                    continue
                self.lines += chunk
                while b"\n" in self.lines:
                    line, self.lines = self.lines.split(b"\n", 1)
                    event = json.loads(line)
                    kind = event.get("type")
                    if kind == "done":
                        return True
                    if kind in ("stdout", "stderr"):
                        cell.stream(kind, event.get("text", ""))
                    elif kind == "result":
                        cell.result(event.get("data", {}), True)
                    elif kind == "error" and not (drop_interrupt and event.get("name") == "KeyboardInterrupt"):
                        cell.error(event.get("name", "Error"), event.get("value", ""), event.get("traceback", []))
        return False


def shell_quote(value):
    return "'" + str(value).replace("'", "'\"'\"'") + "'"


KERNELS = {"python": PythonKernel, "bash": BashKernel, "javascript": JavaScriptKernel}
