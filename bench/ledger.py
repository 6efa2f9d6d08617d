"""Ledger benchmark: durable append, read and verify throughput, measured against the raw limit of
the same bytes and against a peer event store, all in one run.

    .venv/bin/python bench/ledger.py            # verify on 100k and 1M events (2-3 minutes)
    .venv/bin/python bench/ledger.py --quick    # 20k and 100k events, smaller append runs

Events are realistic run.recorded and grade.recorded pairs (1.3-2.3 KB of event bytes, about
1.8 KB on average).

* Durable append: `LedgerStore.append` with one event per fsync and with batches (1,000 per
  fsync by default). Every append validates (schema round trip, credential scan) before it writes,
  because that is what the store does; the two halves of an append (validation before the lock;
  lock, chain, write and fsync) are also timed on their own.
* Peer: the `eventsourcing` library's SQLite application recorder (WAL, one transaction per
  `insert_events` call) storing the same event bytes as its state, one event per commit and in
  batches of the same size; then reading them back in pages.
* Verify: `verify_chain` over ledgers of each size, against the raw limit on the same bytes:
  BLAKE3 over each event's bytes plus a typed msgspec decode of each event, timed alone.

Every figure is the best of --repeat runs, in wall-clock and CPU seconds, except the interleaved
lanes: one event per fsync 25 appends at a time, and batches one batch at a time (A B, then B A),
each lane's time summed, so that a burst of other work falls on both. Targets: verify at >= 50%
of the raw limit (on CPU time, which other processes on a shared machine distort far less);
durable append at >= 1.0x the peer one event per fsync (interleaved, on wall time: waiting for
the disk is part of the cost) and, batched, at most 2x the peer's CPU per event (interleaved).
Everything is written under a temporary directory (or --dir) and removed afterwards.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import importlib.metadata
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import msgspec
from blake3 import blake3

from cbledger.ledger import encoding
from cbledger.ledger.chain import GENESIS, format_line, link_hash
from cbledger.ledger.events import (
    Ablations,
    Actor,
    AssertionOutcome,
    Comparability,
    Cost,
    Event,
    EventBase,
    EvidenceDigest,
    FixtureIdentity,
    GradeRecorded,
    GradeRecordedEvent,
    LedgerCreated,
    LedgerCreatedEvent,
    ModelIdentity,
    RunRecorded,
    RunRecordedEvent,
    RunStats,
    SandboxRef,
    TaskIdentity,
    Timings,
)
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.verify import verify_chain

UTC = dt.UTC
T0 = dt.datetime(2026, 3, 1, tzinfo=UTC)
RUNNER = Actor(kind="runner", name="copperbench-runner")
MODELS = ["claude-sonnet-4.5", "gpt-5-mini", "qwen3-coder-480b", "gemini-2.5-pro"]
POOL = 2048  # distinct run bodies; every event still gets its own id and run id


def _h(*parts: object) -> str:
    return blake3("\0".join(map(str, parts)).encode()).hexdigest()


# --------------------------------------------------------------------------- realistic events


def _run(k: int) -> RunRecordedEvent:
    rid = f"run-{k:07d}"
    task = f"mcu-task-{k % 23}"
    model = MODELS[k % len(MODELS)]
    start = T0 + dt.timedelta(seconds=97 * k)
    return RunRecordedEvent(
        id=f"run.recorded:{rid}",
        at=start + dt.timedelta(seconds=95),
        actor=RUNNER,
        body=RunRecorded(
            run_id=rid,
            task=TaskIdentity(
                id=task, tier="medium", mode="do", expected_outcome="edit",
                manifest_hash=_h("m", task), tags=["nets"],
            ),
            fixture=FixtureIdentity(id="synthetic-mcu-sensor", sha256=_h("f")),
            model=ModelIdentity(
                id=model, provider="anthropic", segment="api-frontier", pinning="weak",
                selection_source="flag",
            ),
            repeat=1 + k % 3,
            repeats_planned=3,
            run_mode="agent",
            ablations=Ablations(max_turns=40),
            comparability=Comparability(
                schema_version="1.0.0", suite_version="1.2.0", task_manifest_hash=_h("m", task),
                fixture_sha256=_h("f"), copperhead_version="0.9.3",
                copperhead_commit=_h("c")[:40], kicad_cli_version="9.0.2",
                runtime="python-3.11.9", node_version=None, platform="linux-x86_64",
            ),
            stats=RunStats(
                exit_path="done", turns_used=12 + k % 9, max_turns=40,
                repair_cycles_used=k % 2, max_repair_cycles=3, tokens_in=40_000 + k % 9_000,
                tokens_out=3_000 + k % 700, duration_ms=95_000,
                files_touched=["sensor.kicad_sch"],
            ),
            cost=Cost(usd_micros=150_000 + k % 90_000, price_table_version="2026-03"),
            sandbox=SandboxRef(
                seed_sha=_h("seed", task)[:40], seed_config='{"maxTurns":40}',
                baseline_sha=_h("b", k)[:40], head_sha=_h("h", k)[:40],
                capture_sha=_h("c", k)[:40], evidence_sha=_h("e", k)[:40],
                store=f"runs/{rid}.bundle", store_blake3=_h("s", k), store_bytes=900_000 + k,
            ),
            evidence={
                "transcript": EvidenceDigest(
                    path=f"runs/{rid}/transcript.jsonl", blake3=_h("t", k), bytes=80_000 + k
                ),
            },
            timings=Timings(
                started_at=start, ended_at=start + dt.timedelta(seconds=95),
                duration_ms=95_000, agent_ms=80_000, verify_ms=15_000,
            ),
        ),
    )


_CHECKS = [
    ("net_connected", True, "end-state"),
    ("net_renamed", True, "end-state"),
    ("no_secret", True, "transcript"),
    ("erc_clean", True, "end-state"),
    ("diff_scope", False, "diff"),
]


def _grade(k: int) -> GradeRecordedEvent:
    rid = f"run-{k:07d}"
    failing = k % 4 == 0
    return GradeRecordedEvent(
        id=f"grade.recorded:{rid}:1.2.0",
        at=T0 + dt.timedelta(seconds=97 * k + 120),
        actor=RUNNER,
        body=GradeRecorded(
            run_id=rid,
            suite_version="1.2.0",
            grader_version="2.1.0",
            task_manifest_hash=_h("m", f"mcu-task-{k % 23}"),
            assertions=[
                AssertionOutcome(
                    id=f"a{i}", type=kind, status="fail" if failing and i == 1 else "pass",
                    weight=1.0 + i / 4, required=required, evidence_source=source,
                    detail=f"{kind}: checked against the end state, net VCC_{i} on U{i + 1}",
                )
                for i, (kind, required, source) in enumerate(_CHECKS)
            ],
            verdict="fail" if failing else "pass",
            partial_credit=0.6 if failing else 1.0,
            first_failed_required="a1" if failing else None,
            failure_category="drift-left" if failing else None,
        ),
    )


class Events:
    """Draft events 1..n after `ledger.created`: run k then grade k. Bodies come from a pool of
    POOL runs (building a million distinct nested structs would dominate the run time); ids and
    run ids are unique."""

    def __init__(self) -> None:
        self._runs = [_run(k) for k in range(POOL)]
        self._grades = [_grade(k) for k in range(POOL)]

    def draft(self, i: int) -> EventBase:
        k = i // 2
        t = self._runs[k % POOL] if i % 2 == 0 else self._grades[k % POOL]
        if k < POOL:
            return t
        rid = f"run-{k:07d}"
        kind = "run.recorded" if i % 2 == 0 else "grade.recorded"
        suffix = "" if i % 2 == 0 else ":1.2.0"
        return msgspec.structs.replace(
            t, id=f"{kind}:{rid}{suffix}", body=msgspec.structs.replace(t.body, run_id=rid)
        )

    def drafts(self, start: int, count: int) -> list[EventBase]:
        return [self.draft(i) for i in range(start, start + count)]


def genesis() -> LedgerCreatedEvent:
    return LedgerCreatedEvent(
        id="ledger.created:bench", at=T0, actor=RUNNER, body=LedgerCreated(name="bench")
    )


def write_ledger(path: Path, count: int, events: Events) -> int:
    """A ledger of `count` events (genesis included) written through the chain functions directly;
    `verify_chain` must accept it before it is timed. Returns the file size."""
    prev = GENESIS
    with open(path, "wb", buffering=1 << 22) as f:
        for seq in range(1, count + 1):
            draft = genesis() if seq == 1 else events.draft(seq - 2)
            data = encoding.encode_value(msgspec.structs.replace(draft, seq=seq))
            h = link_hash(prev, seq, data)
            f.write(format_line(data, h, prev))
            prev = h
        f.flush()
        os.fsync(f.fileno())
    return path.stat().st_size


# --------------------------------------------------------------------------- measurements


class T(NamedTuple):
    """Wall-clock and process CPU seconds. Durable appends are judged on wall time (waiting for
    the disk is the cost); CPU-bound ratios on CPU time, which a busy machine distorts far less."""

    wall: float
    cpu: float

    def best(self, other: T) -> T:
        return T(min(self.wall, other.wall), min(self.cpu, other.cpu))

    def __add__(self, other: T) -> T:  # type: ignore[override]
        return T(self.wall + other.wall, self.cpu + other.cpu)


NEVER = T(float("inf"), float("inf"))
ZERO = T(0.0, 0.0)


def each(fn, items) -> None:
    """Calls `fn` on every item and keeps no result alive: a list of 100,000 decoded events would
    make the garbage collector, not the code under test, the thing measured."""
    for item in items:
        fn(item)


def batches(items: list, size: int) -> Iterator[list]:
    return (items[i : i + size] for i in range(0, len(items), size))


def timed(fn) -> T:
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return T(time.perf_counter() - wall, time.process_time() - cpu)


class Row:
    def __init__(self, label: str, events: int, t: T, nbytes: int | None = None):
        self.label, self.events, self.t, self.nbytes = label, events, t, nbytes

    @property
    def rate(self) -> float:
        return self.events / self.t.wall

    @property
    def mbps(self) -> float | None:
        return None if self.nbytes is None else self.nbytes / self.t.wall / 1e6


def print_rows(title: str, rows: list[Row]) -> None:
    print(f"\n{title}")
    print(f"  {'':<54} {'events':>9} {'wall s':>8} {'cpu s':>8} {'events/s':>10} {'MB/s':>7}")
    for r in rows:
        mb = "" if r.mbps is None else f"{r.mbps:7.1f}"
        print(
            f"  {r.label:<54} {r.events:>9,} {r.t.wall:>8.3f} {r.t.cpu:>8.3f} "
            f"{r.rate:>10,.0f} {mb:>7}"
        )


def bench_append(
    work: Path, events: Events, single: int, batched: int, batch: int, repeat: int
) -> list[Row]:
    """Best of `repeat` runs, each on a fresh ledger."""
    single_t = batched_t = prepare_t = write_t = NEVER
    drafts = events.drafts(0, batched)
    for r in range(repeat):
        store = LedgerStore(work / f"append-single-{r}.jsonl")
        store.init("bench", RUNNER)
        single_t = single_t.best(timed(lambda: each(lambda e: store.append([e]), drafts[:single])))

        path = work / "append-batched.jsonl"
        path.unlink(missing_ok=True)
        store = LedgerStore(path)
        store.init("bench", RUNNER)
        batched_t = batched_t.best(
            timed(lambda: each(store.append, batches(drafts, batch)))
        )
        report = verify_chain(path)
        assert report.ok and report.events == batched + 1, report.problem
        # The two halves of an append, each timed alone: what the store does before it takes the
        # lock (schema round trip, credential check, content digest), which the peer has no
        # counterpart for, and the rest (lock, catch-up, seq, chain, write, fsync) with the first
        # half precomputed.
        prepared: dict[int, tuple] = {}
        prepare_t = prepare_t.best(
            timed(lambda: prepared.update((id(e), store._prepare(i, e)) for i, e in enumerate(drafts)))
        )
        path.unlink()
        store = LedgerStore(path)
        store.init("bench", RUNNER)
        store._prepare = lambda i, e: prepared[id(e)]  # type: ignore[method-assign]
        write_t = write_t.best(
            timed(lambda: each(store.append, batches(drafts, batch)))
        )
        assert verify_chain(path).ok
    return [
        Row("cbledger append, 1 event per fsync", single, single_t),
        Row(f"cbledger append, {batch:,} events per fsync", batched, batched_t),
        Row("  half 1: validation before the lock, alone", batched, prepare_t),
        Row("  half 2: lock, seq, chain, write, fsync, alone", batched, write_t),
    ]


def stored_events(path: Path) -> list[tuple[str, bytes]]:
    return [(s.type, s.raw) for s in LedgerStore(path).read(since=1)]


def to_stored(items: list[tuple[str, bytes]]) -> list:
    """The peer's records for the same event bytes: one aggregate per run (its run then grade)."""
    from eventsourcing.persistence import StoredEvent

    out = []
    for type_, raw in items:
        run_id = raw.split(b'"runId":"', 1)[1].split(b'"', 1)[0].decode()
        out.append(
            StoredEvent(
                originator_id=uuid.uuid5(uuid.NAMESPACE_URL, run_id),
                originator_version=1 if type_ == "run.recorded" else 2,
                topic=type_,
                state=raw,
            )
        )
    return out


def peer_recorder(path: Path) -> tuple:
    from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

    ds = SQLiteDatastore(str(path))
    rec = SQLiteApplicationRecorder(ds)
    rec.create_table()
    return ds, rec


def bench_single_interleaved(
    work: Path, events: Events, source: Path, single: int, chunk: int
) -> tuple[Row, Row, Row]:
    """One event per fsync, three lanes in the same minute: `chunk` appends to the ledger,
    `chunk` commits to the peer, and `chunk` bare `write` + `fdatasync` calls of the same ledger
    lines to a file of their own (the disk's floor for a growing file: no validation, no lock,
    no chain); the lanes take turns going first, so a burst of other work on the machine or the
    disk falls on all alike. Summed time per lane."""
    drafts = events.drafts(0, single)
    stored = to_stored(stored_events(source))[:single]
    lines = source.read_bytes().splitlines(keepends=True)[1 : single + 1]
    store = LedgerStore(work / "interleaved.jsonl")
    store.init("bench", RUNNER)
    _, rec = peer_recorder(work / "interleaved.db")
    bare = os.open(work / "interleaved-bare.jsonl", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
    sync = getattr(os, "fdatasync", os.fsync)
    totals = [T(0.0, 0.0), T(0.0, 0.0), T(0.0, 0.0)]
    try:
        for n, at in enumerate(range(0, single, chunk)):
            part_d, part_s, part_l = drafts[at : at + chunk], stored[at : at + chunk], lines[at : at + chunk]

            def ledger_part(part: list = part_d) -> T:
                return timed(lambda: each(lambda e: store.append([e]), part))

            def peer_part(part: list = part_s) -> T:
                return timed(lambda: each(lambda e: rec.insert_events([e]), part))

            def bare_part(part: list = part_l) -> T:
                return timed(lambda: each(lambda line: (os.write(bare, line), sync(bare)), part))

            lanes = [ledger_part, peer_part, bare_part]
            for k in range(3):
                lane = (n + k) % 3
                totals[lane] = totals[lane] + lanes[lane]()
    finally:
        os.close(bare)
    return (
        Row(f"cbledger append, 1 per fsync, interleaved by {chunk}", single, totals[0]),
        Row(f"eventsourcing SQLite, 1 per commit, interleaved by {chunk}", single, totals[1]),
        Row(f"  floor: bare write + fdatasync, interleaved by {chunk}", single, totals[2]),
    )


def bench_batched_interleaved(
    work: Path, events: Events, source: Path, batched: int, batch: int
) -> tuple[Row, Row]:
    """Batches of `batch` events per fsync / commit, two lanes taking turns batch by batch (A B,
    then B A): `LedgerStore.append` of the drafts on a fresh ledger, and the peer's
    `insert_events` of the same event bytes on a fresh database, so the same minute of a shared
    machine falls on both. Summed time per lane; the ratio is judged on CPU time."""
    drafts = events.drafts(0, batched)
    stored = to_stored(stored_events(source))[:batched]
    store = LedgerStore(work / "interleaved-batched.jsonl")
    store.init("bench", RUNNER)
    _, rec = peer_recorder(work / "interleaved-batched.db")
    totals = [ZERO, ZERO]
    for n, at in enumerate(range(0, batched, batch)):
        part_d, part_s = drafts[at : at + batch], stored[at : at + batch]
        lanes = [lambda part=part_d: store.append(part), lambda part=part_s: rec.insert_events(part)]
        for k in range(2):
            lane = (n + k) % 2
            totals[lane] = totals[lane] + timed(lanes[lane])
    report = verify_chain(work / "interleaved-batched.jsonl")
    assert report.ok and report.events == batched + 1, report.problem
    return (
        Row(f"cbledger append, {batch:,} per fsync, interleaved", batched, totals[0]),
        Row(f"eventsourcing SQLite, {batch:,} per commit, interleaved", batched, totals[1]),
    )


def bench_peer(work: Path, source: Path, single: int, batch: int, repeat: int) -> tuple[list[Row], dict]:
    """The same event bytes through eventsourcing's SQLite application recorder; best of
    `repeat` runs, each on a fresh database."""
    stored = to_stored(stored_events(source))
    info = {}
    single_t = batched_t = read_t = decode_t = NEVER
    decoder = msgspec.json.Decoder(Event)
    for r in range(repeat):
        ds, rec = peer_recorder(work / f"peer-single-{r}.db")
        with ds.transaction(commit=False) as c:
            c.execute("PRAGMA journal_mode")
            info["journal_mode"] = c.fetchone()[0]
            c.execute("PRAGMA synchronous")
            info["synchronous"] = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[c.fetchone()[0]]
        single_t = single_t.best(timed(lambda: each(lambda e: rec.insert_events([e]), stored[:single])))
        (work / f"peer-single-{r}.db").unlink()

        ds, rec = peer_recorder(work / f"peer-batched-{r}.db")
        batched_t = batched_t.best(
            timed(lambda: each(rec.insert_events, batches(stored, batch)))
        )
        got: list = []

        def read_all() -> None:
            start = 1
            while page := rec.select_notifications(start, 1000):
                got.extend(page)
                start = page[-1].id + 1

        read_t = read_t.best(timed(read_all))
        assert len(got) == len(stored) and got[-1].state == stored[-1].state
        decode_t = decode_t.best(timed(lambda: each(decoder.decode, [n.state for n in got])))

    total_bytes = sum(len(e.state) for e in stored)
    rows = [
        Row("eventsourcing SQLite, 1 event per commit", single, single_t),
        Row(f"eventsourcing SQLite, {batch:,} events per commit", len(stored), batched_t),
        Row("eventsourcing SQLite, read all (pages of 1,000)", len(stored), read_t, total_bytes),
        Row("  + typed decode of each state", len(stored), decode_t, total_bytes),
    ]
    return rows, info


def bench_read(path: Path, repeat: int) -> list[Row]:
    size = path.stat().st_size
    read_t = decode_t = NEVER
    events: list = []
    for _ in range(repeat):
        events = []
        read_t = read_t.best(timed(lambda: events.extend(LedgerStore(path).read())))
        decode_t = decode_t.best(timed(lambda: each(encoding.decode, [s.raw for s in events])))
    return [
        Row("cbledger read all (LedgerStore.read)", len(events), read_t, size),
        Row("  + typed decode of each event", len(events), decode_t, size),
    ]


_SUFFIX = len(format_line(b"", "0" * 64, GENESIS)) - len(b'{"event":')


def event_slices(path: Path, chunk: int = 64 << 20) -> Iterator[list[bytes]]:
    """The stored event bytes of every line, a chunk at a time (extraction is not timed)."""
    with open(path, "rb") as f:
        rest = b""
        while block := f.read(chunk):
            block = rest + block
            cut = block.rfind(b"\n") + 1
            rest = block[cut:]
            yield [line[9 : len(line) - _SUFFIX + 1] for line in block[:cut].split(b"\n")[:-1]]


def bench_verify(path: Path, repeat: int) -> tuple[list[Row], T]:
    """Best of `repeat` for each figure: the machine may be busy, and the least disturbed run is
    the one closest to what the code costs. Returns the rows and raw-limit / verify time."""
    size = path.stat().st_size
    verify_t = hashing = decoding = one_shot = NEVER
    n = event_bytes = 0
    decoder = msgspec.json.Decoder(Event)
    for _ in range(repeat):
        report = None

        def run() -> None:
            nonlocal report
            report = verify_chain(path)

        verify_t = verify_t.best(timed(run))
        assert report is not None and report.ok, report and report.problem
        n = report.events

        h = d = ZERO
        event_bytes = 0
        for slices in event_slices(path):
            assert decoder.decode(slices[-1]).seq > 0  # the slicing found whole events
            event_bytes += sum(map(len, slices))
            h += timed(lambda s=slices: each(lambda data: blake3(data).digest(), s))
            d += timed(lambda s=slices: each(decoder.decode, s))
            del slices
        hashing, decoding = hashing.best(h), decoding.best(d)

        with open(path, "rb") as f:
            data = f.read(min(size, 256 << 20))
        t = timed(lambda chunk=data: blake3(chunk, max_threads=1).digest())
        one_shot = one_shot.best(T(t.wall * size / len(data), t.cpu * size / len(data)))
        del data

    raw = hashing + decoding
    rows = [
        Row("verify_chain (split, link, BLAKE3, typed decode)", n, verify_t, size),
        Row("  BLAKE3 of each event's bytes alone", n, hashing, event_bytes),
        Row("  typed msgspec decode of each event alone", n, decoding, event_bytes),
        Row("  raw limit (the two above, back to back)", n, raw, event_bytes),
        Row("  (BLAKE3 one-shot over the whole file, 1 thread)", n, one_shot, size),
    ]
    return rows, T(raw.wall / verify_t.wall, raw.cpu / verify_t.cpu)


def main(argv: list[str] | None = None) -> int:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", default=None, help="verify sizes, comma separated (default 100000,1000000)")
    ap.add_argument("--single", type=int, default=None, help="appends with one event per fsync (default 2000)")
    ap.add_argument("--batched", type=int, default=None, help="events appended in batches (default 100000)")
    ap.add_argument("--batch", type=int, default=1000, help="events per fsync in the batched run")
    ap.add_argument("--quick", action="store_true", help="20k/100k verify, 500 single and 20k batched appends")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs (verify: up to 200k events)")
    ap.add_argument("--dir", type=Path, default=None, help="work directory (default: a new temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--append-only", action="store_true", help="append and read back only (no verify runs)")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in (args.events or ("20000,100000" if args.quick else "100000,1000000")).split(",")]
    if args.append_only:
        sizes = []
    single = args.single or (500 if args.quick else 2000)
    batched = args.batched or (20_000 if args.quick else 100_000)

    work = Path(tempfile.mkdtemp(prefix="cbledger-bench-", dir=args.dir))
    versions = ", ".join(
        f"{name} {importlib.metadata.version(name)}" for name in ("msgspec", "blake3", "eventsourcing")
    )
    print(
        f"cbledger ledger benchmark: Python {platform.python_version()}, {versions}, "
        f"SQLite {sqlite3.sqlite_version}; {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs; best of {args.repeat}"
    )
    events = Events()
    sample = [encoding.encode(events.draft(i)) for i in range(1000)]
    print(
        f"events: run.recorded/grade.recorded pairs, {sum(map(len, sample)) / len(sample):,.0f} "
        f"bytes per event on average (run {len(sample[0]):,}, grade {len(sample[1]):,})"
    )
    try:
        append_rows = bench_append(work, events, single, batched, args.batch, args.repeat)
        source = work / "append-batched.jsonl"  # written by the last append run
        peer_rows, peer_info = bench_peer(work, source, single, args.batch, args.repeat)
        mixed = bench_single_interleaved(work, events, source, single, chunk=25)
        paired = bench_batched_interleaved(work, events, source, batched, args.batch)
        print_rows(
            "durable append (each acknowledged only after its fsync / commit)",
            [append_rows[0], peer_rows[0], *mixed, append_rows[1], append_rows[2], append_rows[3], peer_rows[1], *paired],
        )
        cpu_ours, cpu_peer = (r.t.cpu / r.events * 1e6 for r in paired)
        print(
            f"  CPU per event, batches interleaved: cbledger {cpu_ours:.1f} us, peer {cpu_peer:.1f} us "
            f"({cpu_ours / cpu_peer:.2f}x); validation before the lock alone {append_rows[2].t.cpu / batched * 1e6:.1f} us"
        )
        print(
            f"  peer: eventsourcing SQLiteApplicationRecorder, journal_mode={peer_info['journal_mode']}, "
            f"synchronous={peer_info['synchronous']}"
        )
        print_rows(f"read back ({batched:,} events)", bench_read(source, args.repeat) + peer_rows[2:])

        ratios = []
        for n in sizes:
            path = work / f"verify-{n}.jsonl"
            t = time.perf_counter()
            size = write_ledger(path, n, events)
            built = time.perf_counter() - t
            rows, ratio = bench_verify(path, args.repeat if n <= 200_000 else 1)
            ratios.append((n, ratio))
            print_rows(f"verify {n:,} events, {size / 1e6:,.0f} MB (built in {built:.0f} s)", rows)
            print(f"  verify / raw limit: {ratio.cpu:.2f} on CPU time ({ratio.wall:.2f} on wall time)")
            path.unlink()

        single_ratio = mixed[0].rate / mixed[1].rate  # the same minute for both: the fair ratio
        cpu_ratio = cpu_ours / cpu_peer
        print("\ntargets")
        for n, ratio in ratios:
            verdict = "met" if ratio.cpu >= 0.5 else "MISSED"
            print(f"  verify >= 50% of the raw limit (CPU time), {n:>9,} events: {ratio.cpu:6.0%}  {verdict}")
        verdict = "met" if cpu_ratio <= 2.0 else "MISSED"
        print(f"  batched CPU per event <= 2x peer (cbledger/peer, interleaved): {cpu_ratio:6.2f}x {verdict}")
        print(f"    (wall time, interleaved: {paired[0].rate / paired[1].rate:.2f}x the peer's events/s)")
        verdict = "met" if single_ratio >= 1.0 else "MISSED"
        print(f"  one event per fsync >= 1.0x peer (wall time, cbledger/peer, interleaved):  {single_ratio:6.2f}x {verdict}")
        floor_ratio = mixed[2].rate / mixed[1].rate
        overhead = (mixed[0].t.wall - mixed[2].t.wall) / single * 1e6
        print(
            f"    the disk's floor (bare write + fdatasync) is {floor_ratio:.2f}x the peer in the same minute; "
            f"an append costs {overhead:,.0f} us more than the floor"
        )
    finally:
        if args.keep:
            print(f"\nkept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
