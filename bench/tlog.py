"""Checkpoint benchmark: the Merkle tree over the ledger at 10k, 100k and 1M events, against plain
SHA-256 over the same lines, with proof sizes, all in one run.

    .venv/bin/python bench/tlog.py            # 10k, 100k and 1M events (about 5 minutes, 1.8 GB on disk)
    .venv/bin/python bench/tlog.py --quick    # 1k, 10k and 100k events

Ledgers are `bench/ledger.py`'s realistic run.recorded and grade.recorded pairs (about 1.8 KB a
line). For each size, in one run:

* baseline: SHA-256 of every line, read from the file (the same number of hash calls as leaves,
  none of the tree);
* the tree alone: leaf hashes of the file's lines into a compact range, nothing else;
* chain alone: `verify_chain` (what `replay --verify --chain-only` costs without checkpoints);
* tree head through the store's read API (`tlog.scan`: `LedgerStore.read`, leaf bytes, compact
  range) — how proofs read the ledger;
* chain and tree in one pass (`tlog.verified_scan`) — what `cbledger checkpoint` and
  `replay --verify --checkpoint` pay;
* the whole `cbledger checkpoint` (`publish.publish`: the pass, signing, writing the file, and the
  store's append of `checkpoint.published`, which indexes the ledger's ids first);
* appends to the compact range: node hashes per append (mean and worst) and seconds per append;
* proofs: the inclusion proof of the last event and the consistency proof from half the size, in
  hashes and JSON bytes, with the time to make (one pass) and to verify (no ledger) each.

Every figure is the best of --repeat runs (wall-clock seconds). Files live under a temporary
directory (or --dir) and are removed afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.ledger import Events, write_ledger
from bench.projections import best
from cbledger.ledger import merkle, proofs, publish, tlog
from cbledger.ledger.checkpoint import Checkpoint
from cbledger.ledger.events import Actor
from cbledger.ledger.keys import SigningKey
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.verify import verify_chain


def sha256_lines(path: Path) -> int:
    n = 0
    with open(path, "rb", buffering=1 << 20) as f:
        for line in f:
            hashlib.sha256(line).digest()
            n += 1
    return n


def tree_of_lines(path: Path) -> bytes:
    """The tree head over the file's lines with nothing else: the Merkle tree's own cost."""
    cr = merkle.CompactRange()
    with open(path, "rb", buffering=1 << 20) as f:
        for line in f:
            cr.append(merkle.leaf_hash(memoryview(line)[:-1]))
    return cr.root()


def compact_appends(n: int) -> tuple[float, float, int]:
    """(seconds per append, mean node hashes per append, worst) over n leaf hashes."""
    leaves = [hashlib.sha256(i.to_bytes(8, "big")).digest() for i in range(n)]
    cr = merkle.CompactRange()
    start = time.perf_counter()
    for leaf in leaves:
        cr.append(leaf)
    seconds = time.perf_counter() - start
    merges = [(i ^ (i + 1)).bit_length() - 1 for i in range(n)]  # trailing ones of the size before
    return seconds / n, sum(merges) / n, max(merges)


def run(size: int, work: Path, repeat: int, events: Events) -> dict[str, float | int]:
    path = work / f"ledger-{size}.jsonl"
    nbytes = write_ledger(path, size, events)
    store = LedgerStore(path)
    out: dict[str, float | int] = {"events": size, "bytes": nbytes}
    out["sha256"], n = best(lambda: sha256_lines(path), repeat)
    assert n == size
    out["tree_lines"], root_lines = best(lambda: tree_of_lines(path), repeat)
    out["chain"], report = best(lambda: verify_chain(path), repeat)
    assert report.ok and report.events == size  # type: ignore[attr-defined]
    out["read_tree"], root = best(lambda: tlog.scan(store, [size]).root(size), repeat)
    out["one_pass"], scanned = best(lambda: tlog.verified_scan(path), repeat)
    assert scanned[1].root(size) == root == root_lines  # type: ignore[index]

    key = SigningKey.from_seed("bench.example/ledger", hashlib.sha256(b"bench").digest())
    copy = work / f"publish-{size}.jsonl"
    shutil.copyfile(path, copy)
    start = time.perf_counter()
    done = publish.publish(LedgerStore(copy), key, lambda s: work / "checkpoints" / f"{s}.txt",
                           Actor(kind="maintainer", name="bench"))
    out["checkpoint"] = time.perf_counter() - start
    assert done.appended is not None and done.checkpoint.root == root
    copy.unlink()

    out["append_s"], out["append_mean"], out["append_worst"] = compact_appends(size)
    start = time.perf_counter()
    for _ in range(1000):
        scanned[1].hasher.root()  # type: ignore[index]
    out["root_s"] = (time.perf_counter() - start) / 1000

    cp = Checkpoint("bench.example/ledger", size, root)  # type: ignore[arg-type]
    out["inc_make"], inc = best(lambda: proofs.prove_inclusion(store, size, size, cp.origin), 1)
    start = time.perf_counter()
    proofs.verify_inclusion_proof(inc, cp)  # type: ignore[arg-type]
    out["inc_verify"] = time.perf_counter() - start
    out["inc_hashes"], out["inc_bytes"] = len(inc.hashes), len(proofs.encode(inc))  # type: ignore[union-attr,arg-type]
    half = size // 2
    out["cons_make"], cons = best(lambda: proofs.prove_consistency(store, half, size, cp.origin), 1)
    old = Checkpoint(cp.origin, half, tlog.scan(store, [half]).root(half))
    start = time.perf_counter()
    proofs.verify_consistency_proof(cons, old, cp)  # type: ignore[arg-type]
    out["cons_verify"] = time.perf_counter() - start
    out["cons_hashes"], out["cons_bytes"] = len(cons.hashes), len(proofs.encode(cons))  # type: ignore[union-attr,arg-type]
    path.unlink()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1k, 10k and 100k events instead of 10k, 100k and 1M")
    ap.add_argument("--sizes", type=int, nargs="*", help="ledger sizes (events), overriding --quick")
    ap.add_argument("--repeat", type=int, default=2, help="best of N for the passes (default 2)")
    ap.add_argument("--dir", type=Path, help="work directory (default: a temporary one)")
    args = ap.parse_args(argv)
    sizes = args.sizes or ([1_000, 10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000])
    work = Path(tempfile.mkdtemp(prefix="cbledger-tlog-", dir=args.dir))
    events = Events()
    rows = []
    try:
        for size in sizes:
            r = run(size, work, args.repeat, events)
            rows.append(r)
            print(f"measured {size:,} events", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nPython {sys.version.split()[0]}, {os.cpu_count()} CPUs; best of {args.repeat}, wall seconds\n")
    print("| events | ledger | SHA-256 of every line | tree alone | chain alone | tree via store.read | chain + tree, one pass | `cbledger checkpoint` | tree / SHA-256 | one pass / chain alone |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['events']:,} | {r['bytes'] / 1e6:,.0f} MB | {r['sha256']:.3f} s | {r['tree_lines']:.3f} s | "
              f"{r['chain']:.3f} s | {r['read_tree']:.3f} s | {r['one_pass']:.3f} s | {r['checkpoint']:.3f} s | "
              f"{r['tree_lines'] / r['sha256']:.2f}× | {r['one_pass'] / r['chain']:.2f}× |")
    print("\n| events | append to the compact range | node hashes per append (mean / worst) | root from the range |")
    print("|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['events']:,} | {r['append_s'] * 1e6:.2f} µs | {r['append_mean']:.2f} / {r['append_worst']} | "
              f"{r['root_s'] * 1e6:.1f} µs |")
    print("\n| events | inclusion proof (last event) | make / verify | consistency proof (from half) | make / verify |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['events']:,} | {r['inc_hashes']} hashes, {r['inc_bytes']:,} B | "
              f"{r['inc_make']:.2f} s / {r['inc_verify'] * 1e3:.2f} ms | {r['cons_hashes']} hashes, "
              f"{r['cons_bytes']:,} B | {r['cons_make']:.2f} s / {r['cons_verify'] * 1e3:.2f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
