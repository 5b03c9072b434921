"""A real ``python -m rlmesh_gym`` server process for tests, with bounded waits."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading

BANNER = re.compile(r"^rlmesh-gym: serving .* on (\S+)$")


class Served:
    """``python -m rlmesh_gym ARGS`` in a subprocess; every wait on it is bounded."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rlmesh_gym", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        # One reader per pipe, so neither fills up and blocks the server.
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        self.stderr.extend(self.process.stderr)

    def address(self, timeout: float = 60.0) -> str:
        while True:
            line = self.lines.get(timeout=timeout)
            if line is None:
                raise AssertionError(f"server exited early: {self.finish()}")
            self.stdout.append(line)
            match = BANNER.match(line)
            if match:
                return match.group(1)

    def finish(self, signum: int | None = None, timeout: float = 30.0) -> tuple[int, str, str]:
        """Send ``signum`` (if still running), wait for the exit; return (code, stdout, stderr)."""
        if signum is not None and self.process.poll() is None:
            self.process.send_signal(signum)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout)
        for reader in self._readers:
            reader.join(timeout)
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.stdout.append(line)
        self.process.stdout.close()
        self.process.stderr.close()
        return self.process.returncode, "\n".join(self.stdout), "".join(self.stderr)
