"""Start and stop the *built* countdown-server binary for the end-to-end tests.

The binary is taken from $COUNTDOWN_SERVER_BIN, else <repo>/.build/debug/countdown-server.
Each server is started with ``--port 0`` and the port is read from the one line the
server prints on stdout: ``countdown-server listening on http://HOST:PORT/``.
At teardown the server gets SIGTERM and must exit with code 0.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import tempfile
import threading
import time
import http.client
from pathlib import Path

import pytest

E2E_DIR = Path(__file__).resolve().parent
REPO_ROOT = E2E_DIR.parent.parent
PUBLIC_DIR = REPO_ROOT / "Public"

LISTEN_RE = re.compile(r"^countdown-server listening on http://(?P<host>[^\s/]+):(?P<port>\d+)/$")
STARTUP_TIMEOUT = 15.0
SHUTDOWN_TIMEOUT = 5.0


def server_binary() -> Path:
    env = os.environ.get("COUNTDOWN_SERVER_BIN")
    if env:
        return Path(env).resolve()
    return (REPO_ROOT / ".build" / "debug" / "countdown-server").resolve()


class ServerProcess:
    """A running countdown-server child process."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None, binary: Path | None = None,
                 prefix: list[str] | None = None):
        self.args = args
        self.env = env
        self.binary = binary
        self.prefix = prefix or []
        self.stderr_file = tempfile.TemporaryFile()
        self.proc: subprocess.Popen | None = None
        self.host = ""
        self.port = 0
        self.listen_line = ""
        self._extra_stdout = bytearray()

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> "ServerProcess":
        binary = self.binary or server_binary()
        if not binary.exists():
            pytest.fail(
                f"countdown-server binary not found at {binary} "
                "(run `swift build` or set COUNTDOWN_SERVER_BIN)"
            )
        self.proc = subprocess.Popen(
            [*self.prefix, str(binary), *self.args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self.stderr_file,
            bufsize=0,
            cwd=str(REPO_ROOT),
            env=None if self.env is None else {**os.environ, **self.env},
        )
        line = self._read_first_line(STARTUP_TIMEOUT)
        m = LISTEN_RE.match(line)
        if not m:
            self.kill()
            pytest.fail(
                f"unexpected first stdout line from server: {line!r}\nstderr:\n{self.stderr()}"
            )
        self.listen_line = line
        self.host = m.group("host")
        self.port = int(m.group("port"))
        if self.port == 0:
            self.kill()
            pytest.fail(f"server printed port 0 (must print the real bound port): {line!r}")
        # Keep draining stdout so the server can never block on a full pipe.
        threading.Thread(target=self._drain_stdout, daemon=True).start()
        return self

    def _read_first_line(self, timeout: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buf = bytearray()
        deadline = time.monotonic() + timeout
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                pytest.fail(
                    f"server printed no listening line within {timeout}s; stdout so far {bytes(buf)!r}\n"
                    f"stderr:\n{self.stderr()}"
                )
            ready, _, _ = select.select([fd], [], [], min(left, 0.2))
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:  # EOF: the server died
                    rc = self.proc.wait(timeout=5)
                    pytest.fail(
                        f"server exited with code {rc} before printing its listening line; "
                        f"stdout {bytes(buf)!r}\nstderr:\n{self.stderr()}"
                    )
                buf += chunk
            elif self.proc.poll() is not None:
                pytest.fail(
                    f"server exited with code {self.proc.returncode} before printing its listening "
                    f"line; stdout {bytes(buf)!r}\nstderr:\n{self.stderr()}"
                )
        line, _, rest = bytes(buf).partition(b"\n")
        self._extra_stdout += rest
        return line.decode("utf-8", "replace").rstrip("\r")

    def _drain_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            while True:
                chunk = self.proc.stdout.read(4096)
                if not chunk:
                    return
                self._extra_stdout += chunk
        except (OSError, ValueError):
            return

    def stderr(self) -> str:
        # pread, not seek + read: the child shares this file's offset, and moving it
        # while the server logs would make its next line overwrite earlier ones.
        try:
            fd = self.stderr_file.fileno()
            return os.pread(fd, os.fstat(fd).st_size, 0).decode("utf-8", "replace")
        except (OSError, ValueError):
            return "<stderr unavailable>"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self, sig: int = signal.SIGTERM, timeout: float = SHUTDOWN_TIMEOUT) -> int:
        """Send `sig` and return the exit code; fail if it does not exit within `timeout`."""
        assert self.proc is not None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"server did not exit within {timeout}s of signal {sig}\nstderr:\n{self.stderr()}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def stop_and_check(self) -> None:
        """Teardown: the server must still be alive, and must exit 0 on SIGTERM."""
        assert self.proc is not None
        if not self.alive():
            rc = self.proc.returncode
            pytest.fail(f"server died during the tests (exit code {rc})\nstderr:\n{self.stderr()}")
        rc = self.terminate(signal.SIGTERM)
        assert rc == 0, f"server exited with {rc} on SIGTERM (expected 0)\nstderr:\n{self.stderr()}"

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Waits for /readyz to answer 200: in a cluster, the listening line comes before
        Redis is connected, and until then reads and commands are refused `unavailable`."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=2)
            try:
                connection.request("GET", "/readyz")
                response = connection.getresponse()
                last = (response.status, response.read())
                if response.status == 200:
                    return
            except OSError as error:
                last = error
            finally:
                connection.close()
            if time.monotonic() > deadline or not self.alive():
                pytest.fail(f"/readyz not 200 within {timeout}s (last {last!r})\nstderr:\n{self.stderr()}")
            time.sleep(0.05)

    # -- addresses -----------------------------------------------------------------
    @property
    def http_base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def ws_url(self, session: str) -> str:
        return f"ws://{self.host}:{self.port}/ws/{session}"


def start_server(*extra: str, public: Path | str = PUBLIC_DIR, env: dict[str, str] | None = None,
                 prefix: list[str] | None = None, ready: bool | None = None) -> ServerProcess:
    """`env` is added to this process's environment (COUNTDOWN_* variables); `prefix` runs
    the server through another command (for example `unshare`). `ready` waits for /readyz;
    by default a cluster instance is waited for (`wait_ready`), and a test that starts one
    without a reachable Redis passes False."""
    args = ["--port", "0", "--public", str(public)]
    if "--data" not in extra and not (env and "COUNTDOWN_DATA" in env):
        # Each server its own database, so no test restores another's sessions.
        args += ["--data", str(Path(tempfile.mkdtemp(prefix="countdown-test-")) / "countdown.db")]
    server = ServerProcess([*args, *extra], env, prefix=prefix).start()
    if ready if ready is not None else "--redis" in extra:
        server.wait_ready()
    return server
