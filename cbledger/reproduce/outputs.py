"""Are the committed projections what the log folds to?

Each output is regenerated in memory from the ledger and compared with what is on disk: every
record and retraction mark, as files or as rows of the packed store (missing, extra or different, with the first differing line; a
retracted run's records must still be there, unchanged, beside their mark), LEADERBOARD.md (a
unified diff), the SQLite read model's content (its canonical dump; SQLite's page layout is
not a contract) and every page of the HTML site (missing, different or extra, with the first
differing line). Nothing is written.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path, PurePosixPath
from typing import Any

from cbledger import invocation
from cbledger.ledger.durable import staged_name
from cbledger.projections import leaderboard, packed, readmodel, records, writers
from cbledger.projections.fold import LedgerState
from cbledger.projections.site import render as site_render
from cbledger.projections.site.evidence import RunEvidence
from cbledger.projections.writers import record_files  # noqa: F401  (where bench and tests import it from)
from cbledger.reproduce.findings import Finding
from cbledger.workspace import (
    LEADERBOARD,
    READ_MODEL,
    SITE,
    Workspace,
    record_name,
)


@dataclass
class OutputsCheck:
    records_expected: int = 0
    records_matching: int = 0
    leaderboard_matches: bool = False
    leaderboard_diff: str = ""
    readmodel_matches: bool = False
    site_pages: int = 0
    site_matching: int = 0
    #: run pages not compared: their runs' evidence could not be read back (the runs' checks say why)
    site_not_compared: int = 0
    #: why, for the first of them: what a reader can do about it
    site_not_compared_why: str = ""
    failures: list[Finding] = field(default_factory=list)
    #: where each was read, as a reader opens it (`Workspace.shown`): under `--results DIR` there
    leaderboard_path: str = LEADERBOARD
    readmodel_path: str = READ_MODEL
    site_path: str = SITE

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": {"expected": self.records_expected, "matching": self.records_matching},
            "leaderboard": {"path": self.leaderboard_path, "matches": self.leaderboard_matches, "diff": self.leaderboard_diff},
            "readModel": {"path": self.readmodel_path, "matches": self.readmodel_matches},
            "site": {"path": self.site_path, "expected": self.site_pages, "matching": self.site_matching,
                     "notCompared": self.site_not_compared},
            "failures": [f.to_dict() for f in self.failures],
        }


def first_difference(committed: list[str], regenerated: list[str]) -> tuple[int, str | None, str | None]:
    """(1-based line, committed line, regenerated line) of the first difference; None past an end."""
    for i, (a, b) in enumerate(zip(committed, regenerated, strict=False)):
        if a != b:
            return i + 1, a, b
    n = min(len(committed), len(regenerated))
    return n + 1, (committed[n] if n < len(committed) else None), (regenerated[n] if n < len(regenerated) else None)


def _clip(line: str | None, width: int = 200) -> str | None:
    if line is None:
        return None
    return line if len(line) <= width else line[:width] + "…"


def _quoted(line: str | None) -> str:
    """A line in a message: quoted, or what it is when one side ended before the other."""
    return repr(_clip(line)) if line is not None else "(past its end)"


def check_records(state: LedgerState, workspace: Workspace, out: OutputsCheck) -> None:
    entries = {e.path: e for e in (*records.record_entries(state), *records.record_entries(state, retracted=True))}
    expected = dict(records.published(state))
    out.records_expected = len(expected)
    with writers.RecordStore(workspace.results) as store:
        _compare_records(entries, expected, store, out, lambda rel: packed.record_shown(workspace, record_name(rel)))


def _compare_records(
    entries: Mapping[str, records.RecordEntry], expected: Mapping[str, bytes], store: writers.RecordStore, out: OutputsCheck,
    named: Callable[[str], str],
) -> None:
    on_disk = store.paths()
    for rel in sorted(on_disk - expected.keys()):
        out.failures.append(
            Finding(check="projection", kind="record-extra", file=named(rel),
                    message="a record file the ledger does not produce (no run and grade for it): written for events "
                            "this ledger no longer holds (a torn tail repaired after its outputs were written?) or "
                            "put there by hand; `project` never removes a record, so if the ledger is right, "
                            "delete that record")
        )
    for rel, data in sorted(expected.items()):
        entry = entries.get(rel)
        if rel not in on_disk:
            what = "retraction mark" if entry is None else "record"
            out.failures.append(
                Finding(check="projection", kind="record-missing", file=named(rel),
                        seq=entry.graded.seq if entry else None, run_id=entry.run_id if entry else None,
                        suite_version=entry.suite_version if entry else None,
                        message=f"the ledger produces this {what}; it is not there (run `{invocation.command('project', 'records')}`)")
            )
            continue
        committed = store.read(rel) or b""
        if committed == data:
            out.records_matching += 1
            continue
        line, was, now = first_difference(
            committed.decode("utf-8", "replace").splitlines(), data.decode("utf-8").splitlines()
        )
        out.failures.append(
            Finding(check="projection", kind="record-different", file=named(rel), line=line,
                    seq=entry.graded.seq if entry else None, run_id=entry.run_id if entry else None,
                    suite_version=entry.suite_version if entry else None,
                    expected=_clip(now), actual=_clip(was),
                    message=f"first difference at line {line}: committed {_quoted(was)}, regenerated {_quoted(now)}")
        )


def check_leaderboard(state: LedgerState, workspace: Workspace, out: OutputsCheck) -> None:
    path = workspace.leaderboard
    name = out.leaderboard_path = workspace.shown_path(path)
    text = leaderboard.render(state, None)
    if not path.is_file():
        out.failures.append(Finding(check="projection", kind="leaderboard-missing", file=name,
                                    message="not there: put the published LEADERBOARD.md here to check it against the "
                                            f"ledger (`{invocation.command('project', 'leaderboard')}` writes a "
                                            "regeneration, which checks nothing you were given)"))
        return
    result = writers.check_text(path, text, name)
    out.leaderboard_matches = result.matches
    out.leaderboard_diff = result.diff
    if not result.matches:
        line, was, now = first_difference((writers.output_bytes(path) or b"").decode("utf-8", "replace").splitlines(),
                                          text.splitlines())
        out.failures.append(
            Finding(check="projection", kind="leaderboard-different", file=name, line=line,
                    expected=_clip(now), actual=_clip(was),
                    message=f"differs from a regeneration, first at line {line}: committed {_quoted(was)}, "
                            f"regenerated {_quoted(now)}")
        )


def _compare_dumps(committed: Iterator[str], fresh: Iterator[str]) -> tuple[int, tuple[int, str | None, str | None, str | None]]:
    """(lines that differ, (first differing line, committed, regenerated, the table it is in)),
    read from both dumps in step, so neither is ever held whole; a line past one dump's end
    differs, as `first_difference` counts it."""
    differing = 0
    first: tuple[int, str | None, str | None, str | None] = (0, None, None, None)
    table: dict[str, str | None] = {"committed": None, "fresh": None}
    for i, (was, now) in enumerate(zip_longest(committed, fresh), 1):
        for side, line in (("committed", was), ("fresh", now)):
            if line is not None and line.startswith("table "):
                table[side] = line.split(" ", 2)[1]
        if was != now:
            differing += 1
            if not first[0]:
                first = (i, was, now, table["fresh"] if now is not None else table["committed"])
    return differing, first


def check_readmodel(state: LedgerState, workspace: Workspace, out: OutputsCheck) -> None:
    path = workspace.read_model
    name = out.readmodel_path = workspace.shown_path(path)
    meta = readmodel.metadata_path(path)
    meta_ok = writers.output_bytes(meta) == readmodel.metadata(path.stem).encode("utf-8")
    if not meta_ok:
        out.failures.append(Finding(check="projection", kind="readmodel-different", file=workspace.shown_path(meta),
                                    message=f"the read model's datasette metadata is missing or differs (run `{invocation.command('project', 'readmodel')}`)"))
    if path.is_symlink() or (path.exists() and not path.is_file()):
        out.failures.append(Finding(check="projection", kind="readmodel-different", file=name,
                                    message="a link or special file where the read model should be; not read"))
        return
    if not path.is_file():
        out.failures.append(Finding(check="projection", kind="readmodel-missing", file=name,
                                    message=f"the read model is not there (run `{invocation.command('project', 'readmodel')}`)"))
        return
    with tempfile.TemporaryDirectory(prefix="cbledger-readmodel-") as scratch:
        # regenerated into a scratch database and read back in key order beside the committed one,
        # a row at a time from each: the check holds no table whole, at any ledger size
        fresh = readmodel.write(readmodel.stream_tables(state), Path(scratch) / "fresh.db")
        try:
            damaged = readmodel.damage(path)
            differing, (line, was, now, table) = _compare_dumps(readmodel.dump_lines(path), readmodel.dump_lines(fresh))
        except Exception as exc:  # not a database, or not one of ours
            out.failures.append(Finding(check="projection", kind="readmodel-different", file=name,
                                        message=f"cannot be read as a read model: {exc}"))
            return
    if damaged is not None:
        out.failures.append(Finding(check="projection", kind="readmodel-different", file=name,
                                    message=f"SQLite finds the file damaged ({_clip(damaged)}): a query can read what "
                                            f"the tables do not hold (run `{invocation.command('project', 'readmodel')}`)"))
    if not differing:
        out.readmodel_matches = damaged is None
        return
    out.failures.append(
        Finding(check="projection", kind="readmodel-different", file=name, line=line, field=table,
                expected=_clip(now), actual=_clip(was),
                message=f"content differs from a regeneration ({differing} dump line(s)), first in table {table} "
                        f"at dump line {line}: committed {_quoted(was)}, regenerated {_quoted(now)}")
    )


def _site_files(root: Path) -> tuple[set[str], set[str]]:
    """Every entry under the site but its directories, relative to it, and among them those that
    are not regular files (a link to anything, a FIFO): those are never opened, since a results
    directory handed over could link a page to any file of this machine, which a difference
    would then quote. A link to a directory is not followed. Listed under the projectors' lock
    (`writers.one_projector`), so no writer is staging a page meanwhile: a staged file is extra."""
    found: set[str] = set()
    odd: set[str] = set()
    for top, dirs, files in os.walk(root):
        here = Path(top)
        for name in files + [d for d in dirs if (here / d).is_symlink()]:
            rel = (here / name).relative_to(root).as_posix()
            found.add(rel)
            if not stat.S_ISREG((here / name).lstat().st_mode):
                odd.add(rel)
    return found, odd


def check_site(
    state: LedgerState, workspace: Workspace, out: OutputsCheck | None = None, known: Mapping[str, RunEvidence] | None = None
) -> list[Finding]:
    """Every page the site renders against what is under `results/site/`; any other file there
    (a page the ledger does not produce, a script, a link) is extra. The page of a run whose preserved evidence cannot be
    read back as recorded is not compared: the run's own check reports why (a missing fixture, a
    bundle that changed), and a page rendered from it would only repeat that. A run no check of
    its own read (not in `known`: before `--since-checkpoint`'s checkpoint, or `project site
    --check`) is reported here instead, unless only its board is not materialized on this
    machine: a damaged preserved run must not shrink the check to a count."""
    # imported here: it restores runs as `verify` does, and `verify` imports this module
    from cbledger.reproduce import site_evidence

    evidence = site_evidence.gather(workspace, state, known=known)
    problems = {site_render.run_page(rid): ev.problem for rid, ev in sorted(evidence.items()) if ev.problem is not None}
    unreadable = set(problems)
    # damage no run check of this command reports: said here, or nothing would say it
    unreported = {site_render.run_page(rid): rid for rid, ev in evidence.items()
                  if ev.problem is not None and not ev.here_only and rid not in (known or {})}
    rendered = dict(site_render.render(state, evidence))
    expected = {rel: data for rel, data in rendered.items() if rel not in unreadable}
    found: list[Finding] = []
    root = workspace.site
    site = workspace.shown_path(root)
    if out is not None:
        out.site_path = site
    # every file, not only pages: a host serves a script or an `.htm` published beside them too
    with writers.one_projector(workspace):
        on_disk, odd = _site_files(root) if root.is_dir() else (set(), set())
    for rel in sorted(on_disk - expected.keys() - unreadable):
        # no writer stages a page while the lock is held: a staged name is a killed writer's, or
        # a name chosen to pass for one, and a host serves it either way
        why = (f"a file a writer staged and never renamed (remove it; `{invocation.command('project', 'site')}` removes "
               "what a killed writer left where it writes pages)"
               if staged_name(PurePosixPath(rel).name) and rel not in odd else "a file under the site the ledger does not produce")
        found.append(Finding(check="projection", kind="site-extra", file=f"{site}/{rel}", message=why))
    for rel in sorted(unreadable - on_disk):
        # not comparable, but not there either: `project site` writes it, without its evidence
        found.append(Finding(check="projection", kind="site-missing", file=f"{site}/{rel}",
                             message=f"the ledger produces this page; it is not there, and its run's evidence cannot be "
                                     f"read here to render it whole ({problems[rel]})"))
    for rel in sorted(unreadable & on_disk & unreported.keys()):
        found.append(Finding(check="projection", kind="site-evidence", file=f"{site}/{rel}", run_id=unreported[rel],
                             message=f"this run's page cannot be compared: its preserved run cannot be read back as "
                                     f"recorded ({problems[rel]})"))
    matching = 0
    for rel, data in sorted(expected.items()):
        if rel not in on_disk:
            found.append(Finding(check="projection", kind="site-missing", file=f"{site}/{rel}",
                                 message=f"the ledger produces this page; it is not there (run `{invocation.command('project', 'site')}`)"))
            continue
        if rel in odd:
            found.append(Finding(check="projection", kind="site-different", file=f"{site}/{rel}",
                                 message="a link or special file where this page should be; not read"))
            continue
        committed = writers.output_bytes(root / rel) or b""  # lstat'd again: never a link's target
        if committed == data:
            matching += 1
            continue
        line, was, now = first_difference(committed.decode("utf-8", "replace").splitlines(), data.decode("utf-8").splitlines())
        found.append(Finding(check="projection", kind="site-different", file=f"{site}/{rel}", line=line,
                             expected=_clip(now), actual=_clip(was),
                             message=f"first difference at line {line}: committed {_quoted(was)}, regenerated {_quoted(now)}"))
    if out is not None:
        out.site_pages, out.site_matching = len(expected), matching
        out.site_not_compared = len(unreadable & on_disk)
        out.site_not_compared_why = next((problems[rel] for rel in sorted(unreadable & on_disk)), "")
        out.failures += found
    return found


def check_tables(state: LedgerState, workspace: Workspace) -> OutputsCheck:
    """Every output but the site: none of them reads a preserved run."""
    out = OutputsCheck()
    check_records(state, workspace, out)
    check_leaderboard(state, workspace, out)
    check_readmodel(state, workspace, out)
    return out


def check_outputs(state: LedgerState, workspace: Workspace, known: Mapping[str, RunEvidence] | None = None) -> OutputsCheck:
    """`known`: site evidence already read from the runs' restores (`check_site`)."""
    out = check_tables(state, workspace)
    check_site(state, workspace, out, known)
    return out
