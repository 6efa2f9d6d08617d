"""Projection benchmark: full rebuild at 10k and 100k runs, and the incremental update for one new
run at 100k as a ratio to the full rebuild.

    .venv/bin/python bench/projections.py            # 10k and 100k runs (each with a grade)
    .venv/bin/python bench/projections.py --runs 2000

Each size builds a real ledger file through `LedgerStore.append` (setup, not measured), then
measures, best of `--repeat`:

* fold:        read + decode + fold the whole file (`load_state`)
* records:     build every result record from the state
* leaderboard: render LEADERBOARD.md from the state
* incremental: append one run and its grade, then fold just those (`LedgerFollower.poll`),
               reported beside the full fold as a ratio
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import sys
import tempfile
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cbledger.ledger.events import (
    Actor,
    AssertionOutcome,
    Comparability,
    Cost,
    EvidenceDigest,
    FixtureIdentity,
    GradeRecorded,
    GradeRecordedEvent,
    ModelIdentity,
    RunRecorded,
    RunRecordedEvent,
    RunStats,
    SandboxRef,
    SuiteBumped,
    SuiteBumpedEvent,
    TaskIdentity,
    Timings,
)
from cbledger.ledger.store import LedgerStore
from cbledger.projections import leaderboard, records
from cbledger.projections.writers import LedgerFollower, load_state

UTC = dt.UTC
T0 = dt.datetime(2026, 9, 1, tzinfo=UTC)
ACTOR = Actor(kind="runner", name="bench")
TASKS = [(f"task-{i:02d}", ("simple", "medium", "hard")[i % 3], "refusal" if i % 7 == 0 else "edit") for i in range(21)]
MODELS = [("vendor:frontier-a", "api-frontier"), ("vendor:cheap-b", "api-cheap"), ("hosted:open-c", "open-weight-hosted"),
          ("claude-code", "saved-login"), ("vendor:frontier-d", "api-frontier")]


def h(*parts: object) -> str:
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()


def _sandbox(**fields) -> SandboxRef:
    return SandboxRef(**{k: v for k, v in fields.items() if k in SandboxRef.__struct_fields__})


def events_for(i: int) -> list:
    """Run i and its grade, as drafts."""
    task_id, tier, outcome = TASKS[i % len(TASKS)]
    model, segment = MODELS[(i // len(TASKS)) % len(MODELS)]
    rid = f"bench-{i:07d}"
    started = T0 + dt.timedelta(seconds=37 * i)
    passed = (i * 2654435761) % 100 < 70
    run = RunRecorded(
        run_id=rid,
        task=TaskIdentity(id=task_id, tier=tier, mode="do", expected_outcome=outcome, manifest_hash=h("m", task_id)),
        fixture=FixtureIdentity(id="bench-board", sha256=h("fixture")),
        model=ModelIdentity(id=model, provider="p", segment=segment, pinning="strong", selection_source="flag"),
        repeat=1 + (i // (len(TASKS) * len(MODELS))) % 3,
        repeats_planned=3,
        run_mode="agent",
        comparability=Comparability(
            schema_version="1.0.0", suite_version="1.0.0", task_manifest_hash=h("m", task_id),
            fixture_sha256=h("fixture"), copperhead_version="0.9.0", copperhead_commit=None,
            kicad_cli_version="9.0.8", runtime="python-3.11", node_version="v22.17.0", platform="linux-x64",
        ),
        stats=RunStats(exit_path="done" if passed else "stalled", turns_used=9, max_turns=40, repair_cycles_used=1,
                       max_repair_cycles=3, tokens_in=40_000 + i % 997, tokens_out=3_000 + i % 101),
        cost=Cost(usd_micros=None if segment == "saved-login" else 90_000 + i % 5_000,
                  price_table_version=None if segment == "saved-login" else "2026-09"),
        sandbox=_sandbox(
            seed_sha=h("seed", task_id)[:40], seed_config='{"maxTurns": 40}', baseline_sha=h("b", task_id)[:40],
            head_sha=h("h", i)[:40], capture_sha=h("c", i)[:40], evidence_sha=h("e", i)[:40],
            store=f"results/runs/{rid}.bundle", store_blake3=h("s", i), store_bytes=100_000,
        ),
        evidence={"transcript": EvidenceDigest(path=f".copperhead/runs/{rid}/transcript.jsonl", blake3=h("t", i), bytes=90_000)},
        timings=Timings(started_at=started, ended_at=started + dt.timedelta(seconds=30), duration_ms=30_000,
                        agent_ms=25_000, verify_ms=5_000),
    )
    grade = GradeRecorded(
        run_id=rid, suite_version="1.0.0", grader_version="1.0.0", task_manifest_hash=h("m", task_id),
        assertions=[
            AssertionOutcome(id=f"a{k}", type="net_present", status="fail" if (not passed and k == 0) else "pass",
                             weight=1.0 + k, required=True, evidence_source="end-state", detail="observed")
            for k in range(6)
        ],
        verdict="pass" if passed else "fail", partial_credit=1.0 if passed else 0.75,
        first_failed_required=None if passed else "a0", failure_category=None if passed else "stalled",
    )
    return [
        RunRecordedEvent(id=f"run:{rid}", at=started, actor=ACTOR, body=run),
        GradeRecordedEvent(id=f"grade:{rid}", at=started + dt.timedelta(seconds=40), actor=ACTOR, body=grade),
    ]


def build_ledger(path: Path, runs: int) -> float:
    store = LedgerStore(path)
    store.init("bench", Actor(kind="maintainer", name="bench"))
    t = time.perf_counter()
    store.append([SuiteBumpedEvent(id="suite:1.0.0", at=T0, actor=ACTOR, body=SuiteBumped(
        suite_version="1.0.0", previous=None, reason="bench", vocabulary_hash=h("v"),
        credential_patterns_hash=h("c"), grader_version="1.0.0",
        task_manifest_hashes={t[0]: h("m", t[0]) for t in TASKS}, fixture_hashes={"bench-board": h("fixture")}))])
    batch: list = []
    for i in range(runs):
        batch.extend(events_for(i))
        if len(batch) >= 10_000:
            store.append(batch)
            batch = []
    if batch:
        store.append(batch)
    return time.perf_counter() - t


def best(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return min(times), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    incremental_at = max(args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.runs:
            path = Path(tmp) / f"ledger-{n}.jsonl"
            setup = build_ledger(path, n)
            size = path.stat().st_size
            fold_s, state = best(lambda: load_state(path), args.repeat)
            rec_s, entries = best(lambda: records.record_entries(state), args.repeat)
            lb_s, _ = best(lambda: leaderboard.render(state), 1)
            print(f"{n:>7} runs + {n} grades ({size / 1e6:.0f} MB ledger, built in {setup:.1f} s):")
            print(f"          full rebuild, fold (read + decode + fold): {fold_s:8.3f} s")
            print(f"          result records from the state:             {rec_s:8.3f} s ({len(entries)} records)")
            print(f"          LEADERBOARD.md from the state:             {lb_s:8.3f} s")
            if n == incremental_at:
                follower = LedgerFollower(path)
                follower.poll()
                times = []
                for k in range(args.repeat):
                    LedgerStore(path).append(events_for(n + k))
                    t = time.perf_counter()
                    folded = follower.poll()
                    times.append(time.perf_counter() - t)
                    assert folded == 2
                inc = min(times)
                full = load_state(path)
                assert msgspec.json.encode(full) == msgspec.json.encode(follower.state)
                print(f"          incremental, one new run + its grade:      {inc * 1e3:8.3f} ms "
                      f"= {inc / fold_s:.2e} of the full fold ({fold_s / inc:,.0f}x faster); "
                      "equals a full rebuild")


if __name__ == "__main__":
    main()
