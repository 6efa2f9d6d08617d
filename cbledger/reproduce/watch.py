"""`cbledger watch`: the projections follow the ledger as events land.

A file ledger's directory is watched (not the file: a watch on a file's inode misses a file that
is replaced); a PostgreSQL ledger is followed by LISTEN on its channel, which every append
notifies in the transaction that commits it. Either way a burst of appends is regenerated once,
after the ledger has been quiet for the debounce interval (or at the latest ten intervals into a
steady stream of appends, so a busy runner still sees its numbers move), and a missed
notification costs at most a second: on every quiet second the head is compared with the fold. A ledger that cannot be folded is reported — once per
distinct problem — and the outputs stay at the last good state until it is repaired.

The records, LEADERBOARD.md and the read model are written on every regeneration, from
aggregates kept as the events fold; the HTML site, whose aggregate pages are rendered from the
whole state, is written on the first quiet second after them (and on `--once` and on stopping),
so a steady stream of appends is not held up behind it.

A watch keeps a projection snapshot (`cbledger.projections.snapshot`) after its first
regeneration and when it stops, whenever it folded at least `SNAPSHOT_AFTER` events past the last
one, so the next start-up resumes near the head instead of where `project all` last left it; not
between appends, where writing one would hold up the next regeneration.

SIGINT and SIGTERM stop the loop between regenerations, so an output is never left half
written; a second SIGINT interrupts at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from cbledger import invocation
from cbledger.errors import UserError
from cbledger.ledger.postgres import PostgresRecorder
from cbledger.ledger.recorder import CorruptRecord, StoreUnavailable
from cbledger.ledger.store import LedgerStore
from cbledger.projections import writers
from cbledger.reproduce.regenerate import Regenerator, Update
from cbledger.workspace import Workspace

Echo = Callable[[str], None]

#: events folded past the last snapshot before a watch keeps another (a fold of this many is
#: well under a second, a snapshot of a large ledger several seconds)
SNAPSHOT_AFTER = 10_000


@dataclass(frozen=True)
class WatchOptions:
    debounce_ms: int = 200
    exec_cmd: str | None = None
    once: bool = False
    read_model: bool = True
    site: bool = True


#: what `signal.signal` returns and takes back: a function, SIG_DFL/SIG_IGN, or None (set outside Python)
_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


class _Stop:
    """Turns the first SIGINT/SIGTERM into a request to stop; a second SIGINT interrupts."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal: str | None = None
        self._saved: dict[int, _Handler] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._saved[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)

    def _handle(self, signum, _frame) -> None:
        if self.event.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum).name
        self.event.set()


def _run_exec(cmd: str, root: Path, update: Update, echo: Echo) -> bool:
    """Runs the --exec command; whether it succeeded."""
    env = {**os.environ, "CBLEDGER_HEAD_SEQ": str(update.head_seq)}
    proc = subprocess.run(cmd, shell=True, cwd=root, env=env, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        echo(f"watch: --exec exited {proc.returncode}: {cmd}")
    return proc.returncode == 0


class Watcher:
    def __init__(self, workspace: Workspace, options: WatchOptions, echo: Echo) -> None:
        store = LedgerStore(workspace.ledger)
        if not store.exists():
            raise UserError(f"{store.location}: no ledger here (run `{invocation.command('init')}` first)")
        if options.debounce_ms < 1:
            raise UserError("--debounce-ms must be at least 1")
        self.root, self.ledger, self.options, self.echo = workspace.root, workspace.ledger, options, echo
        self.workspace = workspace
        #: damage the site step found before the part this watch folded (it resumed from a
        #: snapshot past it): nothing is published while it stands
        self._damaged: str | None = None
        #: the last --exec command failed (with --once, the exit code says so)
        self._exec_failed = False
        self.snapshots = workspace.snapshots
        #: the seq of the last snapshot this watch started from or kept (None: not started yet)
        self._snapshot_seq: int | None = None
        self.location = store.location
        self.regenerator = Regenerator(workspace, read_model=options.read_model, site=options.site, defer_site=True,
                                       note=lambda line: echo(f"watch: {line}"))
        self._reported: str | None = None
        #: the ledger file as the last regeneration saw it (size, mtime, inode), None if absent
        self._seen: tuple[int, int, int] | None = None

    def regenerate(self) -> Update | None:
        if self._damaged is not None and self._still_damaged():
            return None
        if isinstance(self.ledger, Path):
            self._seen = _file_identity(self.ledger)  # taken before the read, so no write is missed
        update = self.regenerator.refresh()
        problem = self.regenerator.problem
        if problem is not None and "torn append" in problem:
            time.sleep(min(self.options.debounce_ms, 200) / 1000)  # an append may still be landing
            again = self.regenerator.refresh()
            update = again or update
            problem = self.regenerator.problem
        if problem != self._reported:
            if problem is not None and self.regenerator.withheld:
                self.echo(f"watch: cannot fold the ledger to its end: {problem}; nothing written, the outputs "
                          "on disk are left as they are until it folds to its end")
            elif problem is not None:
                self.echo(f"watch: cannot fold further: {problem}; outputs stay at seq {self.regenerator.written_seq}")
            elif self._reported is not None:
                self.echo("watch: the ledger folds again; resuming")
            self._reported = problem
        if update is not None:
            self.echo(f"watch: {update.describe()}")
            if self.options.exec_cmd:
                self._exec_failed = not _run_exec(self.options.exec_cmd, self.root, update, self.echo)
        return update

    def keep_snapshot(self) -> None:
        """A snapshot of the fold, when it is `SNAPSHOT_AFTER` events or more past the last one."""
        follower = self.regenerator.follower
        if follower is None or self.regenerator.problem is not None or self._damaged is not None:
            return
        if self._snapshot_seq is None:
            self._snapshot_seq = follower.base_seq
        if follower.state.head_seq - self._snapshot_seq < SNAPSHOT_AFTER:
            return
        kept = writers.keep_snapshot(follower, self.snapshots, lambda line: self.echo(f"watch: {line}"))
        if kept is not None:
            self._snapshot_seq = follower.state.head_seq
            self.echo(f"watch: {kept}: snapshot at seq {follower.state.head_seq}")

    def flush_site(self) -> None:
        """The site pages deferred while appends kept coming, written now that the ledger is quiet."""
        if self.regenerator.problem is not None or self._damaged is not None:
            return  # the site waits with the rest until the ledger folds again
        try:
            done = self.regenerator.flush_site()
        except CorruptRecord as exc:
            self._damage(str(exc))
            return
        except (UserError, OSError) as exc:  # the ledger went away under it: tried again when back
            if self.options.once:
                raise  # no later try: the command failed, one line naming the file, exit 2
            self.echo(f"watch: the site waits: {exc}")
            return
        if done is not None:
            seq, pages, seconds = done
            self.echo(f"watch: site at seq {seq}: {pages} page(s) written ({seconds:.2f} s)")

    def _damage(self, why: str) -> None:
        """The site reads every run's events from seq 1, where the fold resumed from a snapshot
        past them: an edit in place there shows only here. Said once; nothing more is published."""
        if why != self._damaged:
            self.echo(f"watch: the ledger is damaged before the part this watch folded (it resumed from a snapshot): "
                      f"{why}; nothing more is published until it is repaired (`{invocation.command('replay', '--verify')}` "
                      "names the damage)")
        self._damaged = why

    def _still_damaged(self) -> bool:
        """Whether the damage the site found stands, read as the site read it."""
        from cbledger.reproduce.site_evidence import chain_links

        try:
            chain_links(self.workspace, set())
        except CorruptRecord as exc:
            self._damage(str(exc))
            return True
        except (UserError, OSError):
            return True  # the ledger away: the next wake looks again
        self.echo("watch: the ledger reads whole again; resuming")
        self._damaged = None
        return False

    def run(self, stop: threading.Event | None = None) -> int:
        """Regenerates now, then on every settled change until stopped. Returns the exit code."""
        self.regenerate()
        self.keep_snapshot()
        if self.options.once:
            self.flush_site()
            return 1 if self.regenerator.problem or self._damaged or self._exec_failed else 0
        stopper = _Stop()
        event = stop or stopper.event
        if stop is None:
            stopper.install()
        step = self.options.debounce_ms
        self.echo(f"watch: watching {self.location} (debounce {step} ms); Ctrl-C to stop")
        try:
            if isinstance(self.ledger, Path):
                self._follow_file(self.ledger, event)
            else:
                self._follow_database(event)
            self.flush_site()  # stopped between regenerations: the site is brought to the same seq
            self.keep_snapshot()
        except KeyboardInterrupt:
            stopper.signal = stopper.signal or "SIGINT"
        finally:
            stopper.restore()
        why = stopper.signal or "stop requested"
        self.echo(f"watch: stopped ({why}); outputs are at seq {self.regenerator.written_seq}")
        return 0

    def _follow_file(self, ledger: Path, event: threading.Event) -> None:
        import watchfiles

        directory = ledger.resolve().parent
        target = str(directory / ledger.name)
        step = self.options.debounce_ms
        # The ledger, or its directory, may vanish and come back (`git checkout` unlinks and
        # rewrites it; a branch without it removes the directory): the watch is restarted on
        # the directory whenever it is there again, and the state is checked on every wake.
        while not event.is_set():
            if not directory.is_dir():
                self.regenerate()
                event.wait(step / 1000)
                continue
            watched = _identity(directory)
            try:
                for _changes in watchfiles.watch(
                    directory,
                    watch_filter=lambda _change, path: path == target,
                    step=step,
                    debounce=max(10 * step, 1600),
                    stop_event=event,
                    rust_timeout=1000,
                    yield_on_timeout=True,
                    raise_interrupt=False,
                    recursive=False,
                ):
                    if event.is_set():
                        break
                    update = None
                    if _changes or self.regenerator.problem is not None or self._grew(ledger):
                        update = self.regenerate()
                    if not _changes and update is None:
                        self.flush_site()  # a quiet second with nothing new: the site's turn
                    if _identity(directory) != watched:
                        break  # removed, or removed and made again: a watch on the old one hears nothing
            except (OSError, RuntimeError) as exc:  # the directory went away under the watch
                if isinstance(exc, OSError) and exc.filename is not None and _identity(directory) == watched:
                    raise  # not the watch's: an output that could not be written (a full disk), said as such
                self.echo(f"watch: the watch on {directory} ended ({exc}); restarting it")
                self.regenerate()
                event.wait(step / 1000)

    def _follow_database(self, event: threading.Event) -> None:
        recorder = LedgerStore(self.ledger).recorder
        if not isinstance(recorder, PostgresRecorder):
            raise UserError(f"{self.location}: this store cannot be watched")
        step = self.options.debounce_ms / 1000
        lost: str | None = None

        def wait(timeout: float) -> bool:
            """A notification, or a connection lost and made again (appends may have gone
            unheard meanwhile); while the server stays down, a pause and False."""
            nonlocal lost
            try:
                got = recorder.wait_for_append(timeout)
            except StoreUnavailable as exc:
                if lost is None:
                    self.echo(f"watch: {exc}; listening again once it is back")
                lost = str(exc)
                event.wait(1.0)
                return False
            if lost is not None:
                self.echo(f"watch: listening on {self.location} again")
                lost = None
                return True
            return got

        # listening from here on (through `wait`: a server that went down since the first
        # regeneration ended the watch with a traceback here), then what landed before is folded
        wait(0)
        self.regenerate()
        try:
            while not event.is_set():
                if wait(1.0):
                    settle = time.monotonic() + max(10 * step, 1.6)
                    while time.monotonic() < settle and not event.is_set() and wait(step):
                        pass
                    self.regenerate()
                elif self.regenerator.problem is not None or self._behind(recorder):
                    if self.regenerate() is None:
                        self.flush_site()
                else:
                    self.flush_site()
        finally:
            recorder.close()

    def _grew(self, ledger: Path) -> bool:
        """A missed notification must not leave the outputs behind: on timeouts, check whether
        the file is another one, or was written, since the last regeneration read it (size, mtime
        and inode: a same-size edit in place changes the mtime; a notification can be lost while
        the watch is re-made on a directory made again). A ledger that is gone counts as changed
        once, so its absence is reported."""
        return _file_identity(ledger) != self._seen

    def _behind(self, recorder: PostgresRecorder) -> bool:
        follower = self.regenerator.follower
        try:
            return follower is not None and recorder.head().seq != follower.state.head_seq
        except UserError:
            return True


def _file_identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def _identity(directory: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(directory)
    except OSError:
        return None
    return st.st_dev, st.st_ino
