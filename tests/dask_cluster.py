"""A real Dask cluster on loopback for the tests: `dask scheduler` and `dask worker` processes
(the CLIs of the pinned distributed), each worker with one thread, no nanny (so a killed worker
stays dead) and a directory of its own. Not an in-process cluster: the runs cross a network
connection, are pickled, and land in other processes, exactly as on several machines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

DASK = Path(sys.executable).parent / "dask"
START_SECONDS = 60.0


@dataclass
class Cluster:
    base: Path
    address: str = ""
    scheduler: subprocess.Popen | None = None
    workers: dict[str, subprocess.Popen] = field(default_factory=dict)
    _logs: list[IO[bytes]] = field(default_factory=list)

    def _log_file(self, name: str) -> IO[bytes]:
        f = open(self.base / f"{name}.log", "wb")  # noqa: SIM115  (open for as long as the process runs)
        self._logs.append(f)
        return f

    def start(self) -> Cluster:
        self.base.mkdir(parents=True, exist_ok=True)
        file = self.base / "scheduler.json"
        self.scheduler = subprocess.Popen(
            [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(file)],
            stdout=self._log_file("scheduler"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_SECONDS
        while not file.is_file() or not file.read_text().strip():
            if self.scheduler.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dask scheduler did not start: {(self.base / 'scheduler.log').read_text()}")
            time.sleep(0.1)
        self.address = json.loads(file.read_text())["address"]
        return self

    def log(self, name: str) -> str:
        return (self.base / f"{name}.log").read_text(errors="replace")

    def add_worker(self, name: str, env: dict[str, str] | None = None, wait: bool = True) -> subprocess.Popen:
        proc = subprocess.Popen(
            [str(DASK), "worker", self.address, "--name", name, "--nthreads", "1", "--no-nanny",
             "--no-dashboard", "--host", "127.0.0.1", "--local-directory", str(self.base / name)],
            stdout=self._log_file(name), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
        self.workers[name] = proc
        if wait:
            deadline = time.monotonic() + START_SECONDS
            while "Registered to:" not in self.log(name):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"dask worker {name} did not register: {self.log(name)}")
                time.sleep(0.1)
        return proc

    def kill(self, name: str) -> None:
        proc = self.workers[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)

    def stop(self) -> None:
        """The workers first, then the scheduler: a worker told to stop by both at once (its
        SIGTERM and the scheduler closing) can hang in its own shutdown."""
        for group in (list(self.workers.values()), [self.scheduler]):
            for proc in group:
                if proc is not None and proc.poll() is None:
                    proc.terminate()
            for proc in group:
                if proc is None:
                    continue
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(15)
        for f in self._logs:
            f.close()
