"""The agent sandbox: every process a run starts runs under bubblewrap, confined to its sandbox.

An agent is not trusted. Run as the operator, with the operator's filesystem and process table,
it could read the gold solution through `/proc/$PPID/cwd`, write into `results/`, append to the
ledger, or leave a child behind that outlives its cap. So each process of a run (the harness, and
the setup commands the scripted agents start too) gets:

* its own mount namespace holding only what it needs: `/usr` and the few files of `/etc` that
  programs read, read-only; the tools it runs (node, git, kicad-cli, the copperhead install)
  read-only; a private `/tmp` of bounded size (also its `HOME`); its own `/proc` and `/dev`; and
  its sandbox directory, the one writable place the host sees. The project tree, the ledger and
  the other sandboxes are not there, even where a read-only bind would cover them.
* its own PID namespace. When its first process ends, or the namespace's init is killed at the
  cap, the kernel kills every process left in it: a `setsid` child cannot outlive the run.
* its own network namespace, except where the run needs one: the model's API for a real model
  (the host network: the provider is elsewhere by definition); for a scripted session only the
  loopback endpoint, reached through a Unix socket bound into the sandbox and relayed to
  127.0.0.1 inside it by a small node process; for setup, none at all.
* resource limits inside the namespace (file size, processes, memory per process, no core
  files), a bound on what the sandbox may grow by, checked while it runs, and the wall clock.
* a rebuilt environment: exactly the variables the caller passes, with `HOME` and `TMPDIR` on the
  private `/tmp` and a fixed `PATH`.

When the runner is root, the namespace is set up as root but the run's processes drop to an
unprivileged user id of their own (with no capabilities) before anything of the run executes, so
the process limit applies to them (the kernel never limits root's processes) and they cannot
read what the operator's root could. Otherwise bubblewrap maps the operator's id into a user
namespace of its own.

Where bubblewrap is missing or cannot create namespaces, `probe` says why and the runner refuses
unless `--unsandboxed` is given; such runs are recorded as unsandboxed (`run.recorded.isolation`).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Literal

from blake3 import blake3

from cbledger.errors import UserError

MiB = 1024 * 1024
KILL_GRACE_SEC = 5.0
#: a run's process also ends itself this long after its cap (coreutils `timeout`), so one whose
#: runner died without taking it along (an unsandboxed run, which has no other guard; a sandbox
#: whose lifeline's watcher the agent killed before its runner died, `_run_namespace`) runs on at
#: most this much past its cap, never unmetered for good; the runner's own kill comes first
#: whenever it lives
ORPHAN_MARGIN_SEC = 2 * KILL_GRACE_SEC
TIMEOUT = "/usr/bin/timeout"
SHELL = "/bin/sh"
#: run as the run's own id before its command: a watcher reads the lifeline (standard input, a
#: pipe only the runner can write) and, at its end of file, kills every process of the run; the
#: command starts with nothing on its standard input, as before
_LIFELINE = 'exec 3<&0 </dev/null; { read -r _; kill -KILL -1; } <&3 & exec "$@" 3<&-'
#: how often the sandbox's growth is measured while it runs
WRITE_POLL_SEC = 0.25
#: each file or directory counts at least this much toward the write limit, so that a million
#: empty files are stopped as surely as one large one
MIN_ENTRY_BYTES = 4096
#: where the endpoint's Unix socket appears inside the sandbox
ENDPOINT_DIR = "/run/cbledger"
ENDPOINT_SOCKET = f"{ENDPOINT_DIR}/endpoint.sock"
#: where a copperhead install is bound inside the sandbox
COPPERHEAD_MOUNT = "/opt/copperhead"
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
HOME = "/tmp/home"
#: unprivileged ids a root runner gives a run's processes: one per sandbox, so that concurrent
#: runs never share a process budget
AGENT_ID_BASE = 200_000
AGENT_ID_SPAN = 100_000
#: the system directories bound read-only (as links where the host has links: merged /usr)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: the files and directories of /etc that the tools read; nothing else of /etc is visible
ETC_ENTRIES = (
    "/etc/alternatives", "/etc/ca-certificates", "/etc/ssl", "/etc/fonts", "/etc/ld.so.cache",
    "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/nsswitch.conf", "/etc/hosts",
    "/etc/host.conf", "/etc/gai.conf", "/etc/resolv.conf", "/etc/passwd", "/etc/group", "/etc/mime.types",
)
#: environment variables whose value is a file the tools read: bound when set
FILE_VARIABLES = ("NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE")

Network = Literal["none", "endpoint", "host"]
Isolation = Literal["bubblewrap", "unsandboxed"]

# Runs inside the sandbox in front of the harness when the run's model is the loopback endpoint:
# listens on 127.0.0.1:PORT of the sandbox's own network namespace, relays every connection to
# the endpoint's Unix socket, starts the command once it listens, and exits with its status.
FORWARDER = r"""
"use strict";
const net = require("net");
const os = require("os");
const { spawn } = require("child_process");
const [socketPath, port, ...command] = process.argv.slice(1);
const server = net.createServer((inner) => {
  const outer = net.connect(socketPath);
  inner.pipe(outer);
  outer.pipe(inner);
  inner.on("error", () => outer.destroy());
  outer.on("error", () => inner.destroy());
});
server.listen(Number(port), "127.0.0.1", () => {
  const child = spawn(command[0], command.slice(1), { stdio: "inherit" });
  child.on("error", (err) => { process.stderr.write(`sandbox relay: ${err.message}\n`); process.exit(127); });
  child.on("exit", (code, sig) => process.exit(code !== null ? code : 128 + (os.constants.signals[sig] || 0)));
});
"""


#: the thread's reason to give up the run it is running (`abandon_when`); None: keep going
_abandon = threading.local()


class Abandoned(BaseException):
    """The run's process was killed because whoever wanted the run is gone (a Dask worker's
    driver died): nothing of it will be collected, so it is not paid for any longer. Not an
    `Exception`, so no handler of a run's own failures records it as one; `run_remote` ends
    the task with it."""


@contextlib.contextmanager
def abandon_when(check: Callable[[], str | None]) -> Iterator[None]:
    """While inside, every process this thread runs is killed as soon as `check` names a reason
    (polled with the write limit), and `Abandoned` raised in its place."""
    _abandon.check = check
    try:
        yield
    finally:
        _abandon.check = None


def give_up() -> None:
    """Raises `Abandoned` if the check installed by `abandon_when` names a reason: polled while a
    process runs, and called by a caller between steps that run none."""
    check = getattr(_abandon, "check", None)
    why = check() if check is not None else None
    if why is not None:
        raise Abandoned(why)


@dataclass(frozen=True)
class Limits:
    """What one run's processes may use. Real boards are a few MiB; the bounds leave a wide
    margin for them and none for a run that tries to fill the disk, the memory or the process
    table. `memory_bytes` is per process (RLIMIT_DATA: what it may allocate, not what it maps)."""

    file_bytes: int = 32 * MiB
    written_bytes: int = 128 * MiB
    processes: int = 512
    memory_bytes: int = 4096 * MiB
    tmp_bytes: int = 128 * MiB


@dataclass(frozen=True)
class Bind:
    """A host path made visible read-only inside the sandbox at `inside`."""

    source: Path
    inside: str


@dataclass(frozen=True)
class Confinement:
    """How the runner confines the processes of a run: under bubblewrap (`bwrap` set), or not at
    all (`--unsandboxed`). `hidden` are the paths no sandbox may see even where a bind covers
    them: the project, the ledger's directory, the sandbox root (the other runs' sandboxes)."""

    bwrap: str | None
    limits: Limits = field(default_factory=Limits)
    hidden: tuple[Path, ...] = ()

    @property
    def isolation(self) -> Isolation:
        return "bubblewrap" if self.bwrap else "unsandboxed"


@dataclass(frozen=True)
class Job:
    """One process of a run: what to start, where, with which environment and network."""

    argv: list[str]
    workdir: Path
    env: dict[str, str]
    wall_clock_sec: float
    log_dir: Path | None = None
    network: Network = "none"
    #: (socket on the host, port inside) of the loopback endpoint for `network="endpoint"`
    endpoint: tuple[Path, int] | None = None
    binds: tuple[Bind, ...] = ()
    #: tools whose install must be visible (node, git, kicad-cli): bound read-only where they are
    tools: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    exit_code: int | None
    #: why the runner killed the run ("the 600s wall-clock cap", "the 128 MiB write limit"), or None
    killed: str | None = None
    stdout: bytes = b""
    stderr: bytes = b""


# ------------------------------------------------------------------------------------- probing


def find_bwrap() -> str | None:
    return shutil.which("bwrap")


@lru_cache(maxsize=4)
def problem(bwrap: str | None) -> str | None:
    """Why bubblewrap cannot confine a run on this machine (None when it can): it is missing, or
    it cannot create the namespaces (a kernel or container that forbids them)."""
    if bwrap is None:
        return "bubblewrap (`bwrap`) is not installed (Debian: apt-get install bubblewrap, or scripts/install-system)"
    workdir = Path(tempfile.mkdtemp(prefix="cbledger-probe-"))
    try:
        out = run(Job(["/bin/sh", "-c", "exit 0"], workdir, {}, 60), Confinement(bwrap))
    except OSError as exc:
        return f"bubblewrap at {bwrap} could not be started: {exc.strerror or exc}"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if out.exit_code != 0:
        detail = out.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bubblewrap at {bwrap} cannot create the sandbox's namespaces here ({detail[-1] if detail else f'exit {out.exit_code}'})"
    return None


def confinement(unsandboxed: bool, hidden: tuple[Path, ...], limits: Limits | None = None) -> Confinement:
    """The confinement a suite run uses: bubblewrap, or with `unsandboxed` none. Refuses when the
    sandbox is wanted and cannot be had, naming why and the way out."""
    if unsandboxed:
        return Confinement(None, limits or Limits(), hidden)
    bwrap = find_bwrap()
    why = problem(bwrap)
    if why is not None:
        raise UserError(
            f"the agent sandbox is unavailable: {why}; install it, or pass --unsandboxed to run agents "
            "without one (such runs are recorded as unsandboxed)"
        )
    return Confinement(bwrap, limits or Limits(), tuple(p.resolve() for p in hidden))


# ------------------------------------------------------------------------------------- running


def run(job: Job, how: Confinement) -> Outcome:
    """Runs `job` to its end, its wall-clock cap or its write limit; returns how it ended.
    stdout and stderr go to `job.log_dir` (stdout.log, stderr.log) when given, else are returned."""
    with _outputs(job.log_dir) as (out, err):
        if how.bwrap is None:
            code, killed = _run_unsandboxed(job, out, err)
        else:
            code, killed = _run_sandboxed(job, how, out, err)
        captured = (b"", b"")
        if job.log_dir is None:
            out.seek(0), err.seek(0)
            captured = (out.read(), err.read())
    return Outcome(code, killed, *captured)


@contextlib.contextmanager
def _outputs(log_dir: Path | None) -> Iterator[tuple]:
    if log_dir is None:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            yield out, err
        return
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / "stdout.log", "wb") as out, open(log_dir / "stderr.log", "wb") as err:
        yield out, err


def _run_unsandboxed(job: Job, out, err) -> tuple[int | None, str | None]:
    """The process in a session of its own, as before the sandbox: the cap kills its process
    group, which a `setsid` child leaves."""
    proc = subprocess.Popen(
        [*_bounded(job), *job.argv], cwd=job.workdir, env=job.env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
        start_new_session=True,
    )
    deadline = time.monotonic() + job.wall_clock_sec
    try:
        while True:
            try:
                return proc.wait(timeout=max(0.0, min(WRITE_POLL_SEC, deadline - time.monotonic()))), None
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    raise
                give_up()
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return None, _cap_note(job)
    except BaseException:
        _kill_group(proc)
        raise


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    _wait(proc, KILL_GRACE_SEC)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _cap_note(job: Job) -> str:
    return f"the {job.wall_clock_sec:g}s wall-clock cap"


def _run_sandboxed(job: Job, how: Confinement, out, err) -> tuple[int | None, str | None]:
    assert how.bwrap is not None
    as_root = os.geteuid() == 0
    agent_id = _agent_id(job.workdir) if as_root else None
    if agent_id is not None:
        _hand_over(job.workdir, agent_id, agent_id)
    try:
        return _run_namespace(job, how, out, err, agent_id)
    finally:
        if agent_id is not None:
            # the namespace is gone, so nothing can race this: the runner takes its sandbox back
            # (git refuses a repository another user owns)
            _hand_over(job.workdir, os.getuid(), os.getgid())


def _run_namespace(job: Job, how: Confinement, out, err, agent_id: int | None) -> tuple[int | None, str | None]:
    """The sandbox's standard input is a lifeline: a pipe whose writing end only this process
    holds, kept open until the run ends. When the runner dies the kernel closes it, and a watcher
    in the sandbox kills the run at once.

    bubblewrap's `--die-with-parent` alone takes hold some milliseconds into its start-up, and a
    runner killed before then (a Dask worker or a driver SIGKILLed as it launched a run) left the
    harness running to its cap: a runner on a thread, as a Dask worker runs it, killed 1 to 8 ms
    after the launch leaked its sandbox each time (tests/test_runner_sandbox.py). A parent-death
    signal set before bubblewrap does not help either: bubblewrap drops capabilities as it starts,
    and the kernel clears the signal on that."""
    start_bytes = tree_bytes(job.workdir)
    info_r, info_w = os.pipe()
    life_r, life_w = os.pipe()  # both close on exec: only the sandbox gets the reading end
    try:
        argv = bwrap_argv(job, how, info_w, agent_id)
        proc = subprocess.Popen(
            argv, cwd="/", env={}, stdin=life_r, stdout=out, stderr=err, pass_fds=(info_w,),
            start_new_session=True,
        )
    except BaseException:
        os.close(info_r)
        os.close(life_w)
        raise
    finally:
        os.close(info_w)
        os.close(life_r)
    info: dict = {}
    try:
        info = _read_info(info_r, proc)
        killed = _watch(proc, job, how.limits, start_bytes)
        if killed is not None:
            _kill_namespace(proc, info)
            return None, killed
        return proc.returncode, None
    except BaseException:
        # Ctrl-C of the runner: the namespace dies with it, whatever it holds
        _kill_namespace(proc, info)
        raise
    finally:
        os.close(info_r)
        os.close(life_w)


def _watch(proc: subprocess.Popen, job: Job, limits: Limits, start_bytes: int) -> str | None:
    """Waits for the sandbox to end; returns why it must be killed instead, when it must."""
    deadline = time.monotonic() + job.wall_clock_sec
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return _cap_note(job)
        try:
            proc.wait(timeout=min(WRITE_POLL_SEC, remaining))
            return None
        except subprocess.TimeoutExpired:
            pass
        give_up()  # raises: the caller kills the namespace, as on Ctrl-C
        grown = tree_bytes(job.workdir) - start_bytes
        if grown > limits.written_bytes:
            return f"the {limits.written_bytes // MiB} MiB write limit (the sandbox grew by {grown // MiB} MiB)"


def _read_info(fd: int, proc: subprocess.Popen) -> dict:
    """bubblewrap's `--info-fd` report: the host pid of the namespace's init and its namespaces.
    Empty when bubblewrap failed before making them."""
    data = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            data += chunk
            try:
                value = json.loads(data)
            except ValueError:
                continue
            return value if isinstance(value, dict) else {}
        if proc.poll() is not None:
            break
    return {}


def _kill_namespace(proc: subprocess.Popen, info: dict) -> None:
    """SIGTERM to every process of the namespace, a grace period, then SIGKILL to its init (the
    kernel then kills whatever is left in it) and to bubblewrap itself."""
    inode, init = info.get("pid-namespace"), info.get("child-pid")
    members = [p for p in namespace_members(inode) if p != init] if isinstance(inode, int) else []
    for pid in members:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    if members:
        _wait(proc, KILL_GRACE_SEC)
    for target in (init, proc.pid):
        if isinstance(target, int):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(target, signal.SIGKILL)
    proc.wait()
    # the kernel tears the namespace down after its init dies, not at once: a run is killed when
    # none of its processes is left, so a command that says so and exits leaves none behind
    deadline = time.monotonic() + KILL_GRACE_SEC
    while isinstance(inode, int) and namespace_members(inode) and time.monotonic() < deadline:
        time.sleep(0.02)


def _wait(proc: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)


def namespace_members(pid_namespace: int) -> list[int]:
    """Host pids of the processes in the PID namespace with this inode."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}/ns/pid").st_ino == pid_namespace:
                found.append(int(entry))
        except OSError:
            continue
    return found


def tree_bytes(root: Path) -> int:
    """What a sandbox holds, as the write limit counts it: every file's size, and every entry at
    least `MIN_ENTRY_BYTES`. Symbolic links are not followed."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            total += max(st.st_size if stat.S_ISREG(st.st_mode) else 0, MIN_ENTRY_BYTES)
    return total


def _agent_id(workdir: Path) -> int:
    return AGENT_ID_BASE + int(blake3(str(workdir).encode()).hexdigest()[:8], 16) % AGENT_ID_SPAN


def _hand_over(workdir: Path, uid: int, gid: int) -> None:
    """Gives the sandbox directory to `uid`: to the run's own id before it starts, so its
    processes can write there (and nowhere else the host has), back to the runner after."""
    os.chown(workdir, uid, gid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(workdir):
        for name in (*dirnames, *filenames):
            with contextlib.suppress(FileNotFoundError):
                os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)


# ------------------------------------------------------------------------------ the command line


def bwrap_argv(job: Job, how: Confinement, info_fd: int, agent_id: int | None) -> list[str]:
    """The bubblewrap command line for `job`: namespaces, mounts, environment, then the run's own
    command behind the id switch, the lifeline's watcher (`_run_namespace`) and the limits."""
    assert how.bwrap is not None
    limits = how.limits
    argv = [how.bwrap, "--die-with-parent", "--new-session", "--info-fd", str(info_fd)]
    argv += _namespaces(job, agent_id)
    argv += _mounts(job, how)
    env = {**job.env, "HOME": HOME, "TMPDIR": "/tmp", "PATH": SANDBOX_PATH}
    for key, value in sorted(env.items()):
        argv += ["--setenv", key, value]
    argv.append("--")
    if agent_id is not None:
        argv += [
            "/usr/bin/setpriv", f"--reuid={agent_id}", f"--regid={agent_id}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
        ]
    # after the id switch: a watcher without CAP_KILL may signal only processes of its own id
    argv += [SHELL, "-c", _LIFELINE, "lifeline"]
    argv += [
        "/usr/bin/prlimit", f"--fsize={limits.file_bytes}", f"--nproc={limits.processes}",
        f"--data={limits.memory_bytes}", "--core=0", "--",
    ]
    argv += _bounded(job)
    if job.network == "endpoint":
        if job.endpoint is None:
            raise ValueError("an endpoint job needs the endpoint's socket and port")
        argv += [job.argv[0], "-e", FORWARDER, ENDPOINT_SOCKET, str(job.endpoint[1])]
    return argv + job.argv


def _bounded(job: Job) -> list[str]:
    """The command's own end, `ORPHAN_MARGIN_SEC` past its cap: SIGTERM, then SIGKILL."""
    if not os.path.exists(TIMEOUT):
        return []
    return [TIMEOUT, f"--kill-after={KILL_GRACE_SEC:g}", f"{job.wall_clock_sec + ORPHAN_MARGIN_SEC:g}"]


def _namespaces(job: Job, agent_id: int | None) -> list[str]:
    argv = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"]
    if job.network != "host":
        argv.append("--unshare-net")
    if agent_id is None:
        argv += ["--unshare-user", "--disable-userns"]
    else:
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    return argv


class _Layout:
    """The mount arguments in order. bubblewrap makes a mount point's missing parents private to
    root, so each is made first, readable by all: the run's own id must be able to walk down to
    what it is given by name."""

    def __init__(self) -> None:
        self.argv: list[str] = []
        self.bound: list[Path] = []
        self._made: set[Path] = {Path("/"), Path("/tmp"), Path("/proc"), Path("/dev")}

    def covered(self, path: Path) -> bool:
        return any(_within(path, b) for b in self.bound)

    def _parents(self, dest: str) -> None:
        for parent in reversed(Path(dest).parents):
            if parent not in self._made and not self.covered(parent):
                self.argv += ["--perms", "0755", "--dir", str(parent)]
                self._made.add(parent)

    def add(self, option: str, source: str, dest: str, *, counts: bool = True) -> None:
        self._parents(dest)
        self.argv += [option, source, dest]
        self._made.add(Path(dest))
        if counts:
            self.bound.append(Path(source).resolve())


def _mounts(job: Job, how: Confinement) -> list[str]:
    """The sandbox's filesystem: system directories, tools, a private /tmp, the hidden paths
    covered, the sandbox itself; the environment is cleared after it."""
    lay = _Layout()
    for d in SYSTEM_DIRS:
        p = Path(d)
        if p.is_symlink():
            lay.argv += ["--symlink", os.readlink(p), d]
        elif p.is_dir():
            lay.add("--ro-bind", d, d)
    for e in ETC_ENTRIES:
        if os.path.lexists(e):
            lay.add("--ro-bind-try", e, e, counts=False)
    lay.argv += ["--proc", "/proc", "--dev", "/dev"]
    lay.argv += ["--perms", "1777", "--size", str(how.limits.tmp_bytes), "--tmpfs", "/tmp", "--perms", "0777", "--dir", HOME]
    for tool in job.tools:
        prefix = tool_prefix(tool)
        if prefix is not None and not lay.covered(prefix):
            lay.add("--ro-bind", str(prefix), str(prefix))
    for name in FILE_VARIABLES:
        value = job.env.get(name)
        if value and Path(value).is_file() and not lay.covered(Path(value).resolve()):
            lay.add("--ro-bind", value, value, counts=False)
    # What no sandbox may see, even under a bind above: covered by an empty directory.
    for hidden in how.hidden:
        if lay.covered(hidden):
            lay.argv += ["--tmpfs", str(hidden)]
    for b in job.binds:
        lay.add("--ro-bind", str(b.source), b.inside, counts=False)
    if job.endpoint is not None:
        lay.add("--ro-bind", str(job.endpoint[0].parent), ENDPOINT_DIR, counts=False)
    workdir = str(job.workdir.resolve())
    lay.add("--bind", workdir, workdir, counts=False)
    return lay.argv + ["--chdir", workdir, "--clearenv"]


def tool_prefix(tool: str) -> Path | None:
    """The installation a tool's executable belongs to (`/opt/node` for `/opt/node/bin/node`),
    to bind read-only; None when it cannot be found."""
    found = shutil.which(tool) if os.sep not in tool else tool
    if not found:
        return None
    real = Path(found).resolve()
    return real.parent.parent if real.parent.name == "bin" else real.parent


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


#: what a run keeps in the system's temporary directory while it goes: the directory of the
#: endpoint's socket into its sandbox, and the copy of its end state being verified
SCRATCH_KINDS = ("endpoint", "verify")


def scratch_prefix(kind: str, sandbox: Path) -> str:
    """The name a run's scratch directory starts with: its kind and a tag of the sandbox root
    and the campaign the run's id starts with (a campaign id holds no `.`), so the campaign's
    next invocation finds what a driver killed mid-run left there (`scratch_left`). The socket's
    path must stay under the kernel's 108 bytes: the tag, not the run id."""
    return _prefix(kind, _scratch_tag(sandbox.parent, sandbox.name.split('.', 1)[0]))


def _prefix(kind: str, tag: str) -> str:
    return f"cbledger-{kind}-{tag}-"


#: the longest path a Unix socket can be bound at (108 bytes with the closing NUL)
SOCKET_PATH_MAX = 107
#: where a socket's directory goes when the temporary directory's own path is too long for one
SHORT_TMP = "/tmp"


#: the endpoint's socket in its scratch directory
ENDPOINT_SOCKET_NAME = "endpoint.sock"


def _socket_base(prefix: str, name: str) -> str:
    """The temporary directory, or /tmp when that directory's path leaves a socket's too long."""
    base = tempfile.gettempdir()
    if len(os.fsencode(os.path.join(base, prefix + "x" * 8, name))) > SOCKET_PATH_MAX:  # mkdtemp adds 8
        return SHORT_TMP
    return base


def socket_scratch(kind: str, sandbox: Path, name: str) -> Path:
    """A new scratch directory (`scratch_prefix`) to bind a socket called `name` in: under the
    temporary directory, or under /tmp when that directory's path leaves the socket's too long
    (a TMPDIR deep in a home or build directory), where `scratch_left` then looks too."""
    prefix = scratch_prefix(kind, sandbox)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=_socket_base(prefix, name)))


def scratch_left(sandbox_root: Path, campaign: str) -> list[Path]:
    tag = _scratch_tag(sandbox_root, campaign)
    endpoint = _socket_base(_prefix("endpoint", tag), ENDPOINT_SOCKET_NAME)
    places = dict.fromkeys(Path(p).resolve() for p in (tempfile.gettempdir(), endpoint))  # /tmp only when used
    return sorted(p for tmp in places for kind in SCRATCH_KINDS for p in tmp.glob(f"{_prefix(kind, tag)}*") if p.is_dir())


def _scratch_tag(sandbox_root: Path, campaign: str) -> str:
    return blake3(f"{sandbox_root.resolve()}\0{campaign}".encode("utf-8", "surrogateescape")).hexdigest()[:8]
