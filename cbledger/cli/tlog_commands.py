"""`cbledger key generate | checkpoint | prove | verify-proof | witness`: signed checkpoints of the
ledger and the proofs that hold it to them (docs/CHECKPOINTS.md). The work is in `cbledger.ledger`
(`publish`, `proofs`, `witness`); this parses, calls and prints.

Exit codes: 0 done / verified; 1 a proof or a witness check failed; 2 bad input or a refused
precondition; 5 the ledger is not an extension of a checkpoint.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from cbledger import invocation
from cbledger.cli.common import (
    JsonFlag,
    LedgerOption,
    RootOption,
    fail,
    into_existing_directory,
    workspace,
)
from cbledger.cli.exits import CHECK_FAILED
from cbledger.inputs import MAX_NOTE_BYTES, read_regular
from cbledger.ledger import durable, proofs, publish, tlog
from cbledger.ledger.checkpoint import Checkpoint, read_unverified
from cbledger.ledger.events import Actor
from cbledger.ledger.keys import SigningKey, VerifierKey
from cbledger.ledger.merkle import ProofError
from cbledger.ledger.note import b64
from cbledger.ledger.signed_checkpoint import ForgedCheckpoint, SignedCheckpoint, open_checkpoint
from cbledger.ledger.store import LedgerStore
from cbledger.ledger.witness import witness as witness_check
from cbledger.login import login_name
from cbledger.reproduce import checkpoints
from cbledger.workspace import KEYS, Workspace

EXIT_NOT_EXTENSION = 5
SIGNING_KEY_ENV = "CBLEDGER_SIGNING_KEY"
DEFAULT_NAME = "copperbench/ledger"

KeyOption = Annotated[
    list[Path] | None,
    typer.Option("--key", metavar="VKEY", help=f"A trusted public key file (repeatable). Default: every {KEYS}/*.vkey under the root."),
]

key_app = typer.Typer(help="Signing keys for checkpoints.", no_args_is_help=True)
prove_app = typer.Typer(help="Inclusion and consistency proofs, from the ledger.", no_args_is_help=True)


def _under(path: Path, directory: Path) -> bool:
    return path.resolve().is_relative_to(directory.resolve())


def _refuse_results(path: Path, where: Workspace, what: str) -> None:
    if _under(path, where.results):
        fail(f"{path}: {what} must never be under {where.results} (published files); keep it outside the repository", 2)


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name).strip("-") or "key"


def trusted_keys(files: list[Path] | None, where: Workspace) -> list[VerifierKey]:
    """The keys named with --key, else every committed `keys/*.vkey`; none is a usage error."""
    keys = checkpoints.trusted_keys(where, files or ())
    if not keys:
        fail(f"no trusted public key: pass --key FILE or commit one under {where.keys}", 2)
    return keys


def _proof_keys(files: list[Path] | None, root: Path | None) -> list[VerifierKey]:
    """The keys of a command that reads no ledger (`verify-proof`, `witness`): with --key, the
    project is not looked for at all, so an error about a proof or a checkpoint does not end in
    a "no cbledger project here" hint, which would send the reader after the wrong fault."""
    if files:
        return checkpoints.trusted_keys(None, files)
    return trusted_keys(files, workspace(None, root))


def _read(path: Path) -> bytes:
    return read_regular(path, MAX_NOTE_BYTES)


# --------------------------------------------------------------------------- key generate


@key_app.command("generate")
def key_generate(
    out: Annotated[Path, typer.Option("--out", metavar="SKEY", callback=into_existing_directory, help="Where the private key goes (outside the repository; never under results/).")],
    name: Annotated[str, typer.Option(help="The key name; the origin of a ledger's first checkpoint (a recorded origin stays).")] = DEFAULT_NAME,
    vkey: Annotated[Path | None, typer.Option("--vkey", metavar="FILE", callback=into_existing_directory, help=f"Where the public key goes. Default: {KEYS}/<name>.vkey under the root (under the results directory for a scratch workspace).")] = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Make an Ed25519 signing key: the private half to --out (mode 0600), the public half to commit."""
    where = workspace(None, root)
    _refuse_results(out, where, "a private key")
    if out.exists():
        fail(f"{out}: already exists; a signing key is never overwritten", 2)
    key = SigningKey.generate(name)
    public = where.own_keys / f"{_file_name(name)}-{key.key_id:08x}.vkey" if vkey is None else vkey
    if public.exists():
        fail(f"{public}: already exists", 2)
    _write_private(out, (key.text() + "\n").encode("utf-8"))
    durable.write_atomic(public, (key.verifier().text() + "\n").encode("utf-8"))
    durable.fsync_directory(public.parent)
    if as_json:
        typer.echo(json.dumps({"private": str(out), "public": str(public), "verifier": key.verifier().text()}, sort_keys=True))
        return
    typer.echo(f"private key: {out} (keep it off the repository; it signs every checkpoint)")
    typer.echo(f"public key:  {public} (commit it: verifiers trust checkpoints signed by it)")
    typer.echo(key.verifier().text())


def _signing_key(path: Path | None, where: Workspace) -> SigningKey:
    if path is None:
        env = os.environ.get(SIGNING_KEY_ENV)
        if not env:
            fail(f"no signing key: pass --key SKEY or set {SIGNING_KEY_ENV}", 2)
        path = Path(env)
    _refuse_results(path, where, "a private key")
    return SigningKey.parse(_read(path).decode("utf-8"), str(path))


# --------------------------------------------------------------------------- checkpoint


def checkpoint(
    key: Annotated[Path | None, typer.Option("--key", metavar="SKEY", envvar=SIGNING_KEY_ENV, show_envvar=True, help="The private signing key.")] = None,
    origin: Annotated[str | None, typer.Option(help="The log's origin line (default: the one recorded, else the key's name).")] = None,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Sign the tree head of the whole ledger into results/checkpoints/<size>.txt and record it as
    `checkpoint.published` (which lands after the events it covers); then keep a projection
    snapshot of the ledger up to that record beside it (results/ledger/snapshots/)."""

    where = workspace(ledger, root)
    signer = _signing_key(key, where)
    actor = Actor(kind="maintainer", name=login_name("maintainer"))
    done = publish.publish(LedgerStore(where.ledger), signer, where.checkpoint, actor, origin)
    if done.appended is not None and signer.verifier() not in checkpoints.trusted_keys(where, ()):
        # signed all the same (a key may be published later), but said: verify holds the ledger to
        # no checkpoint whose signer it does not trust, and LEADERBOARD.md would still list it
        typer.echo(f"warning: {signer.name}+{signer.key_id:08x} is not a key this workspace trusts (no matching .vkey "
                   f"under {', '.join(dict.fromkeys(where.shown_path(d) + '/' for d in (where.keys, where.own_keys)))}): "
                   "replay --verify will not hold the ledger to this checkpoint unless its public key is given with --key",
                   err=True)
    cp = done.checkpoint
    rel = os.path.relpath(done.path, where.root)
    # Also when the checkpoint was recorded already: a run killed between its append and its
    # snapshot is completed by running it again (a snapshot already there is not rewritten).
    kept = _snapshot(where)
    if as_json:
        typer.echo(json.dumps({
            "origin": cp.origin, "treeSize": cp.size, "rootHash": b64(cp.root), "path": rel,
            "recordedAt": done.appended.seq if done.appended else None, "new": done.appended is not None,
            "snapshot": None if kept is None else os.path.relpath(kept, where.root),
        }, sort_keys=True))
        return
    if done.appended is None:
        typer.echo(f"nothing new: {rel} covers every event but its own record (seq {cp.size + 1})")
        if kept is not None:
            typer.echo(f"projection snapshot: {os.path.relpath(kept, where.root)}")
        return
    typer.echo(f"checkpoint {cp.size} ({cp.origin}, root {b64(cp.root)}) signed by {signer.name}+{signer.key_id:08x}")
    typer.echo(f"wrote {rel}; recorded as seq {done.appended.seq} (it covers seq 1..{cp.size}, not its own record)")
    if kept is not None:
        typer.echo(f"projection snapshot: {os.path.relpath(kept, where.root)}")


def _snapshot(where: Workspace) -> Path | None:
    """A snapshot of the fold at the ledger's head, where later projections resume."""
    from cbledger.projections import writers

    def note(line: str) -> None:
        typer.echo(line, err=True)

    return writers.keep_snapshot(writers.follow(where.ledger, where.snapshots, note), where.snapshots, note)


def _write_private(out: Path, data: bytes) -> None:
    """The private key whole or not at all: written and synced under a temporary name (mode
    0600 from the start) and linked into place, which, unlike a rename, never replaces a key
    that appeared meanwhile. An interrupted run leaves no empty or partial key at `out`."""
    with durable.naming(out):
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.{os.getpid()}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, out)
            except FileExistsError:
                fail(f"{out}: already exists; a signing key is never overwritten", 2)
        finally:
            os.unlink(tmp)
        durable.fsync_directory(out.parent)


# --------------------------------------------------------------------------- prove


def _emit(doc: proofs.Proof, out: Path | None, where: Workspace, as_json: bool = False) -> None:
    """The proof (JSON itself) to stdout, or to `out`; with `--json` and `out`, where it went."""
    data = proofs.encode(doc)
    if out is None:
        sys.stdout.buffer.write(data)
        return
    durable.write_atomic(out, data)  # as every -o: the old file or the whole new one
    if as_json:
        typer.echo(json.dumps({"written": str(out), "bytes": len(data)}, sort_keys=True))
    else:
        typer.echo(f"wrote {out}", err=True)


def _not_extension(source: str, problem: str) -> NoReturn:
    fail(f"{source}: the ledger is not an extension of this checkpoint: {problem}", EXIT_NOT_EXTENSION)


def _matches(root_b64: str, cp: Checkpoint, source: str) -> None:
    """The proof was made over the ledger as it is; its root must be the checkpoint's."""
    if root_b64 != b64(cp.root):
        _not_extension(source, f"its first {cp.size} events hash to {root_b64}, the checkpoint says {b64(cp.root)}")


def _latest_covering(store: LedgerStore, seq: int) -> tlog.Recorded:
    covering = [r for r in tlog.recorded(store) if r.body.tree_size >= seq]
    if not covering:
        fail(f"no published checkpoint covers seq {seq} yet: run `{invocation.command('checkpoint')}`, or pass --checkpoint FILE", 2)
    return covering[-1]


@prove_app.command("inclusion")
def prove_inclusion(
    seq: Annotated[int, typer.Argument(min=1, help="The event's seq.")],
    checkpoint_file: Annotated[Path | None, typer.Option("--checkpoint", metavar="FILE", help="Prove against this checkpoint (default: the latest published one covering SEQ).")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", metavar="FILE", callback=into_existing_directory, help="Write the proof here instead of stdout.")] = None,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Print the proof that event SEQ is in a checkpoint's tree (JSON: docs/CHECKPOINTS.md)."""
    where = workspace(ledger, root)
    store = LedgerStore(where.ledger)
    if checkpoint_file is not None:
        cp, source = read_unverified(_read(checkpoint_file)), str(checkpoint_file)
    else:
        head = store.head().seq
        if seq > head:  # no checkpoint can cover it: signing one would not help
            fail(f"no seq {seq}: the ledger has {head} events", 2)
        r = _latest_covering(store, seq)
        cp, source = Checkpoint(r.body.origin, r.body.tree_size, bytes.fromhex(r.body.root_hash)), f"the checkpoint recorded at seq {r.seq}"
    try:
        doc = proofs.prove_inclusion(store, seq, cp.size, cp.origin)
    except tlog.ChainBroken as exc:
        fail(str(exc), CHECK_FAILED)
    except tlog.TreeError as exc:
        if seq <= cp.size:
            _not_extension(source, str(exc))
        raise
    _matches(doc.root_hash, cp, source)
    _emit(doc, out, where, as_json)


def _size_or_checkpoint(arg: str, store: LedgerStore) -> tuple[int, Checkpoint | None]:
    if arg.isascii() and arg.isdigit():
        return int(arg), None
    return read_unverified(_read(Path(arg))).size, read_unverified(_read(Path(arg)))


@prove_app.command("consistency")
def prove_consistency(
    old: Annotated[str, typer.Argument(help="The older tree: a size or a checkpoint file.")],
    new: Annotated[str, typer.Argument(help="The newer tree: a size or a checkpoint file.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", metavar="FILE", callback=into_existing_directory, help="Write the proof here instead of stdout.")] = None,
    ledger: LedgerOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Print the proof that the older tree is a prefix of the newer (JSON: docs/CHECKPOINTS.md)."""
    where = workspace(ledger, root)
    store = LedgerStore(where.ledger)
    old_size, old_cp = _size_or_checkpoint(old, store)
    new_size, new_cp = _size_or_checkpoint(new, store)
    recorded = tlog.recorded(store)
    origin = next((c.origin for c in (new_cp, old_cp) if c is not None), None)
    if origin is None and recorded:
        origin = recorded[-1].body.origin
    try:
        doc = proofs.prove_consistency(store, old_size, new_size, origin)
    except tlog.ChainBroken as exc:
        fail(str(exc), CHECK_FAILED)
    except tlog.TreeError as exc:
        given = [a for a, c in ((old, old_cp), (new, new_cp)) if c is not None]
        if given and old_size <= new_size:
            _not_extension(given[-1], str(exc))
        raise
    # A size the ledger recorded a checkpoint at is held to that checkpoint, as a file is: a
    # history rewritten under it, with every link recomputed, proves only against itself.
    at_size = {r.body.tree_size: r for r in recorded}
    for arg, cp, size, root_b64 in ((old, old_cp, old_size, doc.old_root), (new, new_cp, new_size, doc.new_root)):
        if cp is not None:
            _matches(root_b64, cp, arg)
        elif size in at_size:
            r = at_size[size]
            _matches(root_b64, Checkpoint(r.body.origin, size, bytes.fromhex(r.body.root_hash)),
                     f"the checkpoint recorded at seq {r.seq}")
    _emit(doc, out, where, as_json)


# --------------------------------------------------------------------------- verify-proof


def _open_all(files: list[Path], keys: list[VerifierKey]) -> list[SignedCheckpoint]:
    return [open_checkpoint(_read(p), keys, str(p)) for p in files]


def _by_size(opened: list[SignedCheckpoint], size: int, role: str) -> Checkpoint:
    for c in opened:
        if c.size == size:
            return c.checkpoint
    fail(f"the proof needs the {role + ' ' if role else ''}checkpoint of size {size}; pass it with --checkpoint FILE", 2)


def verify_proof(
    proof_file: Annotated[Path, typer.Argument(metavar="PROOF", help="A proof from `cbledger prove` (- for stdin).")],
    checkpoint_files: Annotated[list[Path], typer.Option("--checkpoint", metavar="FILE", help="A signed checkpoint (repeatable: a consistency proof needs both of its sizes).")],
    key: KeyOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Check a proof with only signed checkpoints and public keys: no ledger is read.

    Exit codes: 0 the proof verifies; 1 it does not (malformed, wrong length, wrong hashes), or a
    checkpoint's trusted signature does not verify (its text changed or the signature forged);
    2 bad input (an unreadable proof, a checkpoint no trusted key signed).
    """
    keys = _proof_keys(key, root)
    data = sys.stdin.buffer.read() if str(proof_file) == "-" else _read(proof_file)
    doc = proofs.decode(data, str(proof_file))
    try:
        opened = _open_all(checkpoint_files, keys)
    except ForgedCheckpoint as exc:
        fail(str(exc), CHECK_FAILED)
    try:
        if isinstance(doc, proofs.InclusionProof):
            cp = _by_size(opened, doc.tree_size, "")
            proofs.verify_inclusion_proof(doc, cp)
            what = f"seq {doc.seq} is in the tree of {cp.size} events signed as {cp.origin}"
        else:
            old = _by_size(opened, doc.old_size, "old")
            new = _by_size(opened, doc.new_size, "new")
            proofs.verify_consistency_proof(doc, old, new)
            what = f"the tree of {old.size} events is a prefix of the tree of {new.size} ({new.origin})"
    except ProofError as exc:
        fail(f"{proof_file}: the proof does not verify: {exc}", 1)
    signers = ", ".join(sorted({k.label for c in opened for k in c.signers}))
    if as_json:

        typer.echo(json.dumps({"verified": True, "what": what, "signers": signers.split(", ")}, sort_keys=True))
        return
    typer.echo(f"verified: {what} (checkpoints signed by {signers})")


# --------------------------------------------------------------------------- witness


def witness(
    state: Annotated[Path, typer.Option("--state", metavar="FILE", help="The witness's own file: the last checkpoint it accepted.")],
    checkpoint_file: Annotated[Path, typer.Option("--checkpoint", metavar="FILE", help="The newly published checkpoint.")],
    proof_file: Annotated[Path | None, typer.Option("--proof", metavar="FILE", help="A consistency proof from the kept checkpoint's size to the new one's.")] = None,
    key: KeyOption = None,
    root: RootOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Accept a new checkpoint only if it extends the last one this witness accepted (no ledger).

    Exit codes: 0 accepted (or nothing kept yet: kept); 1 refused: the log's history was rewritten
    (the proof does not verify), forked (two roots for one size) or rolled back, or a trusted
    signature does not verify; 2 bad input.
    """
    keys = _proof_keys(key, root)
    proof = None
    if proof_file is not None:
        doc = proofs.decode(_read(proof_file), str(proof_file))
        if not isinstance(doc, proofs.ConsistencyProof):
            fail(f"{proof_file}: an inclusion proof; the witness needs a consistency proof", 2)
        proof = doc
    try:
        done = witness_check(state, _read(checkpoint_file), str(checkpoint_file), proof, keys)
    except ForgedCheckpoint as exc:
        fail(str(exc), CHECK_FAILED)
    cp = done.kept.checkpoint
    if as_json:

        typer.echo(json.dumps({
            "outcome": done.outcome, "size": cp.size, "kept": str(checkpoint_file),
            "previousSize": done.previous.size if done.previous is not None else None,
        }, sort_keys=True))
        return
    if done.outcome == "first":
        typer.echo(f"kept {checkpoint_file} (size {cp.size}): nothing was kept before, so it is trusted as the first")
    elif done.outcome == "same":
        typer.echo(f"unchanged: {checkpoint_file} is the kept checkpoint (size {cp.size})")
    else:
        assert done.previous is not None
        typer.echo(f"consistent: size {done.previous.size} -> {cp.size}; kept {checkpoint_file}")


def register(app: typer.Typer) -> None:
    app.add_typer(key_app, name="key")
    app.command()(checkpoint)
    app.add_typer(prove_app, name="prove")
    app.command("verify-proof")(verify_proof)
    app.command()(witness)

