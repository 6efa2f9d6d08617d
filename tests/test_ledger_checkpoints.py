"""Signed checkpoints hold a ledger to what was published: the attack a hash chain cannot see (an
event rewritten and every later link recomputed), truncation and re-extension, proofs checked with
no ledger, and a witness that keeps the last checkpoint it saw and catches a rewritten history."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest

from cbledger.ledger import encoding
from cbledger.ledger.chain import parse_line
from cbledger.ledger.keys import SigningKey
from cbledger.ledger.store import LedgerStore
from cbledger.projections.writers import load_state
from tests.factories import (
    grade_recorded,
    new_ledger,
    pricing_published,
    run_cli,
    run_recorded,
    run_retracted,
    runs_and_grades,
    suite_bumped,
)
from tests.test_ledger_tamper import rechain, with_seq


class Project:
    """A project root with a ledger, a signing key kept outside it and its public key committed."""

    def __init__(self, base: Path) -> None:
        self.root = base / "project"
        self.ledger = self.root / "results" / "ledger" / "events.jsonl"
        self.skey = base / "private" / "ledger.skey"
        self.skey.parent.mkdir(mode=0o700)  # `key generate` writes into a directory that exists
        self.store = new_ledger(self.ledger)
        self.store.append([suite_bumped(1), pricing_published(1)])
        self.store.append(runs_and_grades(8))  # seq 4..11: runs 1-4 and their grades

    def cli(self, *args: str | Path):
        return run_cli([*args, "--root", self.root])

    def checkpoint(self) -> tuple[int, Path]:
        r = self.cli("checkpoint", "--key", self.skey, "--json")
        assert r.exit_code == 0, r.stderr
        doc = json.loads(r.stdout)
        return doc["treeSize"], self.root / doc["path"]

    def append(self, events) -> None:
        LedgerStore(self.ledger).append(events)

    def lines(self) -> list[bytes]:
        return self.ledger.read_bytes().splitlines(keepends=True)

    def events(self) -> list[bytes]:
        return [bytes(parse_line(line).event) for line in self.lines()]


@pytest.fixture
def project(tmp_path: Path) -> Project:
    p = Project(tmp_path)
    r = p.cli("key", "generate", "--out", p.skey, "--name", "test.example/ledger")
    assert r.exit_code == 0, r.stderr
    return p


def _rewrite_seq(events: list[bytes], seq: int, old: bytes, new: bytes) -> list[bytes]:
    out = list(events)
    assert old != new and old in out[seq - 1]
    out[seq - 1] = out[seq - 1].replace(old, new, 1)
    encoding.decode(out[seq - 1])  # still a valid event: only the content gives the forgery away
    return out


def _without_checkpoint_records(events: list[bytes]) -> list[bytes]:
    """The events with every `checkpoint.published` dropped and the seqs closed up, as a forger
    who wants no record of the publication left would write them."""
    kept = [e for e in events if b'"type":"checkpoint.published"' not in e]
    return [with_seq(e, i) for i, e in enumerate(kept, start=1)]


def _forge(events: list[bytes]) -> list[bytes]:
    """seq 4 (the first run.recorded) says repeat 3 instead of 2."""
    return _rewrite_seq(events, 4, b'"repeat":2', b'"repeat":3')


def _hold(path: Path, tmp_path: Path) -> Path:
    """A third party's own copy of a published checkpoint."""
    held = tmp_path / "held" / path.name
    held.parent.mkdir(parents=True, exist_ok=True)
    held.write_bytes(path.read_bytes())
    return held


# --------------------------------------------------------------------------- keys and publishing


def test_key_generate_keeps_the_private_half_out_of_results(project: Project, tmp_path: Path):
    assert stat.S_IMODE(project.skey.stat().st_mode) == 0o600
    assert SigningKey.parse(project.skey.read_text()).name == "test.example/ledger"
    [vkey] = (project.root / "keys").glob("*.vkey")
    assert vkey.read_text().startswith("test.example/ledger+")
    inside = project.root / "results" / "secret.skey"
    r = project.cli("key", "generate", "--out", inside)
    assert r.exit_code == 2 and "must never be under" in r.stderr and not inside.exists()
    assert project.cli("key", "generate", "--out", project.skey).exit_code == 2  # never overwritten
    moved = project.root / "results" / "ledger.skey"
    moved.write_bytes(project.skey.read_bytes())
    r = project.cli("checkpoint", "--key", moved)
    assert r.exit_code == 2 and "must never be under" in r.stderr
    assert not (project.root / "results" / "checkpoints").exists()


def test_key_generate_in_a_scratch_workspace_leaves_the_projects_trusted_keys_alone(project: Project, tmp_path: Path):
    before = sorted((project.root / "keys").glob("*.vkey"))
    scratch = tmp_path / "scratch"
    r = run_cli(["--results", scratch, "key", "generate", "--out", tmp_path / "s.skey", "--name", "scratch.example/x", "--root", project.root])
    assert r.exit_code == 0, r.stderr
    assert sorted((project.root / "keys").glob("*.vkey")) == before
    [own] = (scratch / "keys").glob("*.vkey")
    assert own.read_text().startswith("scratch.example/x+")


def test_checkpoint_signs_the_head_records_itself_after_it_and_is_a_noop_when_nothing_is_new(project: Project):
    size, path = project.checkpoint()
    assert size == 11 and path == project.root / "results" / "checkpoints" / "11.txt"
    text = path.read_text()
    assert text.startswith("test.example/ledger\n11\n") and "\n\n— test.example/ledger " in text
    state = load_state(project.ledger)
    [cp] = state.checkpoints
    assert (cp.seq, cp.tree_size, cp.origin) == (12, 11, "test.example/ledger")
    again = project.cli("checkpoint", "--key", project.skey)
    assert again.exit_code == 0 and "nothing new" in again.stdout
    assert load_state(project.ledger).head_seq == 12
    project.append(runs_and_grades(2, start=10))
    size2, _ = project.checkpoint()
    assert size2 == 14
    assert [c.tree_size for c in load_state(project.ledger).checkpoints] == [11, 14]
    board = project.cli("project", "leaderboard")
    assert board.exit_code == 0, board.stderr
    page = (project.root / "LEADERBOARD.md").read_text()
    assert "`results/checkpoints/14.txt`: origin `test.example/ledger`, size 14 (covers seq 1–14)" in page
    assert "seq 15 is its own record, covered by the next checkpoint" in page


def test_checkpoint_refuses_a_broken_chain_and_an_unknown_key_variable(project: Project):
    lines = project.lines()
    assert b'"repeat":2' in lines[3]
    lines[3] = lines[3].replace(b'"repeat":2', b'"repeat":3', 1)
    project.ledger.write_bytes(b"".join(lines))
    r = project.cli("checkpoint", "--key", project.skey)
    assert r.exit_code == 2 and "does not verify" in r.stderr
    assert not (project.root / "results" / "checkpoints").exists()
    r = run_cli(["checkpoint", "--root", project.root], env={"CBLEDGER_SIGNING_KEY": ""})
    assert r.exit_code == 2 and "no signing key" in r.stderr


# --------------------------------------------------------------------------- the attacks


def test_a_rewritten_event_with_the_whole_chain_recomputed_passes_the_chain_and_fails_the_checkpoint(
    project: Project, tmp_path: Path
):
    size, path = project.checkpoint()
    held = _hold(path, tmp_path)
    project.append([run_retracted(1)])
    assert project.cli("replay", "--verify", "--chain-only", "--checkpoint", held).exit_code == 0

    # The attacker rewrites a run, drops the ledger's record of the checkpoint (which would betray
    # them) and recomputes every link: the chain alone cannot tell.
    forged = _forge(_without_checkpoint_records(project.events()))
    project.ledger.write_bytes(rechain(forged))
    # The checkpoint kept beside the ledger catches it without being asked for ...
    beside = project.cli("replay", "--verify", "--chain-only", "--json")
    assert beside.exit_code == 5, beside.stdout
    [failure] = json.loads(beside.stdout)["failures"]
    assert (failure["kind"], failure["file"]) == ("not-an-extension", f"results/checkpoints/{path.name}")
    # ... unless the attacker removes it too: the chain alone cannot tell
    path.unlink()
    assert project.cli("replay", "--verify", "--chain-only").exit_code == 0

    r = project.cli("replay", "--verify", "--chain-only", "--checkpoint", held, "--json")
    assert r.exit_code == 5, r.stderr
    report = json.loads(r.stdout)
    [failure] = report["failures"]
    assert failure["check"] == "checkpoint" and failure["kind"] == "not-an-extension"
    assert failure["file"] == str(held) and f"at or before seq {size}" in failure["message"]
    human = project.cli("replay", "--verify", "--checkpoint", held)
    assert human.exit_code == 5 and "NOT VERIFIED: the ledger is not an extension of a signed checkpoint" in human.stderr


def test_a_rewrite_that_keeps_the_ledgers_own_checkpoint_record_is_caught_without_any_held_file(project: Project):
    _, path = project.checkpoint()
    path.unlink()  # nor the one kept beside the ledger
    project.ledger.write_bytes(rechain(_forge(project.events())))
    r = project.cli("replay", "--verify", "--chain-only", "--json")
    assert r.exit_code == 5
    [failure] = json.loads(r.stdout)["failures"]
    assert failure["kind"] == "checkpoint-record" and failure["seq"] == 12
    r = project.cli("checkpoint", "--key", project.skey)
    assert r.exit_code == 5 and "refusing to sign" in r.stderr


def test_a_record_re_signed_with_another_key_passes_alone_and_fails_against_the_held_checkpoint(
    project: Project, tmp_path: Path
):
    _, path = project.checkpoint()
    held = _hold(path, tmp_path)
    forger = tmp_path / "forger.skey"
    forger.write_text(SigningKey.generate("test.example/ledger").text())
    project.ledger.write_bytes(rechain(_forge(_without_checkpoint_records(project.events()))))
    path.unlink()
    assert run_cli(["checkpoint", "--key", forger, "--root", project.root]).exit_code == 0
    alone = project.cli("replay", "--verify", "--chain-only", "--json")
    assert alone.exit_code == 0, alone.stdout
    notes = json.loads(alone.stdout)["notes"]
    # the forger's file beside the ledger and its record in it, each signed by no trusted key
    assert [n["kind"] for n in notes] == ["untrusted-signer", "untrusted-signer"]
    assert notes[0]["file"].startswith("results/checkpoints/") and notes[1]["seq"] == 12
    assert project.cli("replay", "--verify", "--chain-only", "--checkpoint", held).exit_code == 5
    text = project.cli("replay", "--verify", "--chain-only")
    assert text.exit_code == 0 and "note: untrusted-signer: [seq 12]" in text.stdout, text.stdout


def test_a_copy_verified_away_from_its_project_says_where_it_looked_for_keys_and_how_to_give_one(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    project.checkpoint()
    laptop = tmp_path / "laptop"
    shutil.copytree(project.root / "results", laptop / "results")  # the ledger and its checkpoints, no keys/
    monkeypatch.chdir(laptop)
    copy = laptop / "results" / "ledger" / "events.jsonl"
    away = run_cli(["replay", "--verify", "--chain-only", "--ledger", copy, "--json"])
    assert away.exit_code == 0, away.stdout
    notes = [n["message"] for n in json.loads(away.stdout)["notes"]]
    assert len(notes) == 2 and all(f"no *.vkey under {laptop}/keys/" in m and "--key VKEY" in m for m in notes), notes
    [vkey] = (project.root / "keys").glob("*.vkey")
    given = run_cli(["replay", "--verify", "--chain-only", "--ledger", copy, "--key", vkey, "--json"])
    assert given.exit_code == 0 and json.loads(given.stdout)["notes"] == []


def test_truncating_and_re_extending_the_ledger_is_caught(project: Project, tmp_path: Path):
    size, path = project.checkpoint()
    held = _hold(path, tmp_path)
    lines = project.lines()
    project.ledger.write_bytes(b"".join(lines[:7]))  # seq 1..7 survive
    r = project.cli("replay", "--verify", "--chain-only", "--checkpoint", held, "--json")
    assert r.exit_code == 5 and "events were removed" in json.loads(r.stdout)["failures"][0]["message"]
    beside = project.cli("replay", "--verify", "--chain-only")  # the one kept beside it covers no part of seq 7
    assert beside.exit_code == 5 and "cover it" not in beside.stdout, beside.stdout
    project.append([run_recorded(9), grade_recorded(9, verdict="fail")])
    project.append(runs_and_grades(6, start=20))
    assert LedgerStore(project.ledger).head().seq > size
    assert project.cli("replay", "--verify", "--chain-only").exit_code == 5  # the checkpoint kept beside it
    path.unlink()
    assert project.cli("replay", "--verify", "--chain-only").exit_code == 0
    r = project.cli("replay", "--verify", "--chain-only", "--checkpoint", held, "--json")
    assert r.exit_code == 5 and json.loads(r.stdout)["failures"][0]["kind"] == "not-an-extension"


def test_an_honest_extension_passes_and_a_checkpoint_by_no_trusted_key_is_refused(project: Project, tmp_path: Path):
    _, path = project.checkpoint()
    project.append(runs_and_grades(2, start=30))
    assert project.cli("replay", "--verify", "--chain-only", "--checkpoint", path).exit_code == 0
    stranger = tmp_path / "stranger.vkey"
    stranger.write_text(SigningKey.generate("test.example/ledger").verifier().text())
    r = project.cli("replay", "--verify", "--chain-only", "--checkpoint", path, "--key", stranger)
    assert r.exit_code == 2 and "no signature by a trusted key" in r.stderr


# --------------------------------------------------------------------------- proofs, with no ledger


def _verify(proof: Path, *checkpoints: Path, key: Path, cwd_root: Path):
    args = ["verify-proof", proof, "--key", key, "--root", cwd_root]
    for c in checkpoints:
        args += ["--checkpoint", c]
    return run_cli(args)


def test_every_event_proves_its_inclusion_and_checkpoints_prove_consistency_without_the_ledger(
    project: Project, tmp_path: Path
):
    size1, cp1 = project.checkpoint()
    project.append(runs_and_grades(3, start=40))
    size2, cp2 = project.checkpoint()
    [vkey] = (project.root / "keys").glob("*.vkey")
    stranger = tmp_path / "stranger"  # no ledger here: verify-proof reads none
    stranger.mkdir()
    for seq in range(1, size2 + 1):
        out = tmp_path / f"inc-{seq}.json"
        r = project.cli("prove", "inclusion", str(seq), "--checkpoint", cp2, "--out", out)
        assert r.exit_code == 0, r.stderr
        v = _verify(out, cp2, key=vkey, cwd_root=stranger)
        assert v.exit_code == 0 and f"seq {seq} is in the tree of {size2} events" in v.stdout, v.stderr
    # without --checkpoint: the latest published checkpoint covering the seq
    r = project.cli("prove", "inclusion", "3")
    assert r.exit_code == 0 and json.loads(r.stdout)["treeSize"] == size2
    cons = tmp_path / "cons.json"
    assert project.cli("prove", "consistency", cp1, cp2, "--out", cons).exit_code == 0
    doc = json.loads(cons.read_text())
    assert (doc["proof"], doc["oldSize"], doc["newSize"], doc["origin"]) == ("consistency", size1, size2, "test.example/ledger")
    assert _verify(cons, cp1, cp2, key=vkey, cwd_root=stranger).exit_code == 0
    missing = _verify(cons, cp2, key=vkey, cwd_root=stranger)
    assert missing.exit_code == 2 and f"old checkpoint of size {size1}" in missing.stderr


def test_tampered_and_padded_proofs_are_refused(project: Project, tmp_path: Path):
    _, cp = project.checkpoint()
    [vkey] = (project.root / "keys").glob("*.vkey")
    good = json.loads(project.cli("prove", "inclusion", "6").stdout)

    def check(doc) -> tuple[int, str]:
        p = tmp_path / "p.json"
        p.write_text(json.dumps(doc))
        r = _verify(p, cp, key=vkey, cwd_root=tmp_path)
        return r.exit_code, r.stderr

    flipped = dict(good, hashes=[good["hashes"][0].replace(good["hashes"][0][0], "A" if good["hashes"][0][0] != "A" else "B", 1), *good["hashes"][1:]])
    assert check(flipped)[0] == 1
    code, err = check(dict(good, hashes=good["hashes"] + [good["rootHash"]]))
    assert code == 1 and "malformed proof" in err
    code, err = check(dict(good, hashes=good["hashes"][:-1]))
    assert code == 1 and "malformed proof" in err
    code, err = check(dict(good, line=good["line"].replace('"seq":6', '"seq":7')))
    assert code == 1 and "leafHash is not the hash of the line" in err
    code, err = check(dict(good, seq=7, leafIndex=6))
    assert code == 1
    code, err = check({"proof": "inclusion", "hashes": "x"})
    assert code == 2 and "not a proof document" in err


def test_a_forged_checkpoint_fails_verify_proof_and_the_witness_as_a_check(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A checkpoint whose trusted signature does not verify is a false artifact, not bad input:
    exit 1, as a proof that does not verify. Run away from any project with --key, the error
    names the checkpoint and adds no "no cbledger project here" hint (neither command needs one)."""
    size, cp = project.checkpoint()
    [vkey] = (project.root / "keys").glob("*.vkey")
    proof = tmp_path / "p.json"
    assert project.cli("prove", "inclusion", "3", "--out", proof).exit_code == 0
    forged = tmp_path / "forged.txt"
    text = cp.read_text()
    forged.write_text(text.replace(f"\n{size}\n", f"\n{size + 1}\n", 1))
    assert forged.read_text() != text
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    monkeypatch.chdir(stranger)
    monkeypatch.delenv("CBLEDGER_ROOT", raising=False)
    for args in (["verify-proof", proof, "--checkpoint", forged, "--key", vkey],
                 ["witness", "--state", stranger / "kept.txt", "--checkpoint", forged, "--key", vkey]):
        r = run_cli(args)
        assert r.exit_code == 1 and "does not verify" in r.stderr and str(forged) in r.stderr, r.stderr
        assert "no cbledger project" not in r.stderr, r.stderr
    assert not (stranger / "kept.txt").exists()
    # elsewhere each command keeps its own codes: exit 1 of replay --verify is a broken chain
    r = project.cli("replay", "--verify", "--chain-only", "--checkpoint", forged, "--key", vkey)
    assert r.exit_code == 2 and "does not verify" in r.stderr, r.output


def test_prove_refuses_a_checkpoint_the_ledger_does_not_extend(project: Project, tmp_path: Path):
    size, cp = project.checkpoint()
    project.append([run_retracted(1)])
    head = size + 2  # the checkpoint's record, then the retraction
    assert project.cli("prove", "consistency", str(size), str(head)).exit_code == 0
    project.ledger.write_bytes(rechain(_forge(project.events())))
    r = project.cli("prove", "inclusion", "5", "--checkpoint", cp)
    assert r.exit_code == 5 and "not an extension" in r.stderr
    assert project.cli("prove", "consistency", cp, str(head)).exit_code == 5
    # by sizes, as a publisher answering a witness asks: the size the ledger recorded a
    # checkpoint at is held to it (this once made a proof of the forgery and exited 0)
    r = project.cli("prove", "consistency", str(size), str(head))
    assert r.exit_code == 5 and f"the checkpoint recorded at seq {size + 1}" in r.stderr, r.output


def test_prove_makes_no_proof_from_a_broken_chain_and_names_a_seq_past_the_head(project: Project):
    project.checkpoint()
    lines = project.lines()
    lines[5] = lines[5].replace(b'"repeat":', b'"repeat": ', 1)  # seq 6: its hash no longer its own
    project.ledger.write_bytes(b"".join(lines))
    for args in (("inclusion", "3"), ("inclusion", "8"), ("consistency", "2", "9")):
        r = project.cli("prove", *args)
        assert r.exit_code == 1 and "the chain is broken at seq 6 (its hash does not hold)" in r.stderr, (args, r.output)
        assert not r.stdout
    r = project.cli("prove", "inclusion", "999")
    assert r.exit_code == 2 and "no seq 999: the ledger has 12 events" in r.stderr, r.stderr


def test_a_given_checkpoint_the_scan_never_reached_is_not_reported_as_matching(project: Project, tmp_path: Path):
    _, cp = project.checkpoint()
    held = _hold(cp, tmp_path)
    lines = project.lines()
    lines[5] = lines[5].replace(b'"repeat":', b'"repeat": ', 1)
    project.ledger.write_bytes(b"".join(lines))
    r = project.cli("replay", "--verify", "--chain-only", "--checkpoint", held, "--json")
    report = json.loads(r.stdout)
    assert r.exit_code == 1 and report["checkpoints"]["given"][0]["ok"] is None, r.stdout


# --------------------------------------------------------------------------- witnessing


def test_a_witness_without_the_ledger_accepts_extensions_and_catches_a_rewritten_history(
    project: Project, tmp_path: Path
):
    [vkey] = (project.root / "keys").glob("*.vkey")
    state = tmp_path / "witness" / "last-checkpoint.txt"
    elsewhere = tmp_path / "witness"

    def witness(checkpoint: Path, proof: Path | None = None):
        args = ["witness", "--state", state, "--checkpoint", checkpoint, "--key", vkey, "--root", elsewhere]
        if proof is not None:
            args += ["--proof", proof]
        return run_cli(args)

    size1, cp1 = project.checkpoint()
    held1 = _hold(cp1, tmp_path)
    first = witness(held1)
    assert first.exit_code == 0 and "trusted as the first" in first.stdout
    assert witness(cp1).exit_code == 0  # the same checkpoint again

    project.append(runs_and_grades(2, start=50))
    size2, cp2 = project.checkpoint()
    needs = witness(cp2)
    assert needs.exit_code == 2 and f"from size {size1} to {size2}" in needs.stderr
    proof = tmp_path / "p12.json"
    assert project.cli("prove", "consistency", str(size1), str(size2), "--out", proof).exit_code == 0
    ok = witness(cp2, proof)
    assert ok.exit_code == 0 and f"consistent: size {size1} -> {size2}" in ok.stdout
    assert state.read_bytes() == cp2.read_bytes()
    accepted = cp2.read_bytes()

    # A maintainer holding the key rewrites seq 4, strips the records that would betray it,
    # recomputes the chain, appends and signs a new checkpoint: the ledger verifies on its own.
    project.ledger.write_bytes(rechain(_forge(_without_checkpoint_records(project.events()))))
    for p in (project.root / "results" / "checkpoints").glob("*.txt"):
        p.unlink()
    project.append(runs_and_grades(3, start=60))
    size3, cp3 = project.checkpoint()
    assert size3 > size2
    assert project.cli("replay", "--verify", "--chain-only").exit_code == 0
    bad_proof = tmp_path / "p23.json"
    assert project.cli("prove", "consistency", str(size2), str(size3), "--out", bad_proof).exit_code == 0
    caught = witness(cp3, bad_proof)
    assert caught.exit_code == 1 and "NOT CONSISTENT" in caught.stderr, caught.stderr
    assert state.read_bytes() == accepted  # the witness keeps what it had

    rollback = witness(held1)
    assert rollback.exit_code == 1 and "ROLLBACK" in rollback.stderr


# --------------------------------------------------------------------------- the committed ledger


def test_the_committed_ledger_extends_its_committed_checkpoint_and_proves_against_it(repo_root: Path, tmp_path: Path):
    """What a stranger with a clone checks: the published checkpoint, signed by the committed key,
    is a prefix of the committed ledger, and any event of it proves its inclusion without the ledger."""
    checkpoints = sorted((repo_root / "results" / "checkpoints").glob("*.txt"), key=lambda p: int(p.stem))
    # A rotated key sits beside the one it replaced (docs/CHECKPOINTS.md): every committed key is
    # trusted, and each checkpoint must verify under one of them.
    keys = [a for vkey in sorted((repo_root / "keys").glob("*.vkey")) for a in ("--key", vkey)]
    assert checkpoints and keys and not list(repo_root.rglob("*.skey"))
    for checkpoint in (checkpoints[0], checkpoints[-1]):
        r = run_cli(["replay", "--verify", "--chain-only", "--checkpoint", checkpoint, "--root", repo_root, "--json"])
        assert r.exit_code == 0, r.stdout
        report = json.loads(r.stdout)
        assert report["checkpoints"]["given"][0]["ok"] and report["checkpoints"]["recorded"] >= 1
        size = int(checkpoint.stem)
        for seq in (1, size // 2, size):
            proof = tmp_path / f"{size}-{seq}.json"
            assert run_cli(["prove", "inclusion", str(seq), "--checkpoint", checkpoint, "--out", proof, "--root", repo_root]).exit_code == 0
            v = run_cli(["verify-proof", proof, "--checkpoint", checkpoint, *keys, "--root", tmp_path])
            assert v.exit_code == 0, v.stderr


def test_import_refuses_a_rewrite_its_own_checkpoint_record_contradicts(project: Project, tmp_path: Path):
    project.checkpoint()
    project.ledger.write_bytes(rechain(_forge(project.events())))
    dest = tmp_path / "copy" / "events.jsonl"
    r = run_cli(["import", "--jsonl", project.ledger, "--ledger", dest, "--root", project.root])
    assert r.exit_code == 2 and "seq 12 records root" in r.stderr and "nothing imported" in r.stderr, r.stderr
    assert not dest.exists() or dest.stat().st_size == 0


def test_checkpoints_kept_beside_a_project_are_not_held_against_another_ledger(project: Project, tmp_path: Path):
    """`--ledger` names another ledger than the project's own: the checkpoint files under the
    project's results/ belong to the project's ledger, not to it."""
    project.checkpoint()
    other = tmp_path / "elsewhere" / "events.jsonl"
    new_ledger(other)
    # the project's results directory, with another ledger: the files there are not this one's
    r = run_cli(["--results", project.root / "results", "replay", "--verify", "--chain-only",
                 "--ledger", other, "--root", project.root])
    assert r.exit_code == 0, r.output
    assert "checkpoint ok" not in r.stdout
    own = project.cli("replay", "--verify", "--chain-only")
    assert own.exit_code == 0 and "checkpoint ok: results/checkpoints/" in own.stdout


@pytest.mark.parametrize("edit", ["root", "size", "garbage"])
def test_a_checkpoint_beside_the_ledger_whose_trusted_signature_fails_is_a_failure(project: Project, edit: str):
    """An edited root line once passed with only a note, and that note said `untrusted-signer`
    although the signer is trusted: a signature that does not verify is a failure."""
    _, path = project.checkpoint()
    lines = path.read_text().split("\n")  # origin, size, root, "", signature
    if edit == "root":
        lines[2] = ("B" if lines[2][0] == "A" else "A") + lines[2][1:]
    elif edit == "size":
        lines[1] = "10"
    else:
        lines = ["not a checkpoint", ""]
    path.write_text("\n".join(lines))
    r = project.cli("replay", "--verify", "--chain-only", "--json")
    assert r.exit_code == 5, r.stdout
    [failure] = json.loads(r.stdout)["failures"]
    assert failure["kind"] == "checkpoint-signature" and failure["file"] == "results/checkpoints/11.txt"
    assert "untrusted-signer" not in r.stdout
    # the verdict blames the checkpoint, not the ledger, and a full verify names it once
    full = project.cli("replay", "--verify")
    assert full.exit_code == 5 and "NOT VERIFIED: a checkpoint does not verify by itself" in full.stderr, full.stderr
    assert "not an extension" not in full.stderr and full.stderr.count("checkpoint-signature") == 1, full.stderr


def test_a_results_directory_that_brings_its_own_key_is_said_to_vouch_for_itself(tmp_path: Path, monkeypatch):
    """A copy handed over, cut short, signed anew with a key generated into its own keys/ and
    re-projected verified with "every check passed" and no word of whose key it was."""
    monkeypatch.chdir(tmp_path)  # outside any project: its keys/ is the directory's own alone
    ws, skey = tmp_path / "handed-over", tmp_path / "theirs.skey"
    for args in (["init", "--name", "copy"], ["key", "generate", "--out", skey, "--name", "copy.example/x"],
                 ["checkpoint", "--key", skey], ["project", "all"]):
        assert run_cli(["--results", ws, *args]).exit_code == 0, args
    r = run_cli(["--results", ws, "replay", "--verify", "--json"])
    assert r.exit_code == 0, r.output
    notes = [n for n in json.loads(r.stdout)["notes"] if n["kind"] == "self-trusted-key"]
    assert len(notes) == 1 and "vouches for itself" in notes[0]["message"] and "--key" in notes[0]["message"]
    # --since-checkpoint starts after none of them, and says why, not that there was none
    since = run_cli(["--results", ws, "replay", "--verify", "--since-checkpoint", "--json"])
    [none] = [n for n in json.loads(since.stdout)["notes"] if n["kind"] == "no-checkpoint"]
    assert "every one is signed only by a key of this results directory" in none["message"], none
    [own] = (ws / "keys").glob("*.vkey")
    held = run_cli(["--results", ws, "replay", "--verify", "--json", "--key", own])
    assert held.exit_code == 0 and not [n for n in json.loads(held.stdout)["notes"] if n["kind"] == "self-trusted-key"]


def test_a_checkpoint_of_a_results_directory_elsewhere_is_named_where_it_is(project: Project, tmp_path: Path):
    """Under `--results DIR` a damaged checkpoint was named `results/checkpoints/N.txt`: the
    project's own file, intact, which a reader then opened and found clean."""
    import shutil

    _, path = project.checkpoint()
    copy = tmp_path / "copy"
    shutil.copytree(project.root / "results", copy)
    damaged = copy / "checkpoints" / path.name
    damaged.write_text("not a checkpoint\n")
    r = run_cli(["--results", copy, "replay", "--verify", "--chain-only", "--json", "--root", project.root])
    assert r.exit_code == 5, r.output
    [failure] = json.loads(r.stdout)["failures"]
    assert failure["kind"] == "checkpoint-signature" and failure["file"] == str(damaged), failure
    assert str(damaged) in failure["message"] and "results/checkpoints" not in failure["message"]


def test_since_checkpoint_never_starts_after_a_checkpoint_only_the_results_directory_vouches_for(
    project: Project, tmp_path: Path,
):
    """A copy handed over, a grade forged, re-signed with a key generated into the copy's own
    keys/: `--since-checkpoint` started after that checkpoint, re-graded nothing and said
    "verified" (the self-trusted-key note needed every checkpoint to be self-signed)."""
    import shutil

    size, _ = project.checkpoint()  # the publisher's, by the project's committed key
    copy, theirs = tmp_path / "handed-over", tmp_path / "theirs" / "x.skey"
    shutil.copytree(project.root / "results", copy)
    LedgerStore(copy / "ledger" / "events.jsonl").append(runs_and_grades(2, start=20))
    theirs.parent.mkdir(mode=0o700)
    for args in (["key", "generate", "--out", theirs, "--name", "copy.example/x"], ["checkpoint", "--key", theirs]):
        r = run_cli(["--results", copy, *args, "--root", project.root])
        assert r.exit_code == 0, r.output
    r = run_cli(["--results", copy, "replay", "--verify", "--since-checkpoint", "--no-projections", "--json",
                 "--root", project.root])
    report = json.loads(r.stdout)
    assert report["sinceCheckpoint"]["size"] == size, report["sinceCheckpoint"]
    notes = [n for n in report["notes"] if n["kind"] == "self-trusted-key"]
    assert notes and "re-grading does not start after it" in notes[0]["message"], report["notes"]


def test_signing_with_a_key_the_workspace_does_not_trust_is_said(project: Project, tmp_path: Path):
    """A checkpoint signed by a key whose public half is under no trusted keys/ binds nothing at
    verify (a note, exit 0), yet it was written without a word."""
    r = project.cli("checkpoint", "--key", project.skey)
    assert r.exit_code == 0 and "warning" not in r.stderr, r.output
    elsewhere, other = tmp_path / "scratch", tmp_path / "other" / "o.skey"
    other.parent.mkdir(mode=0o700)
    assert run_cli(["--results", elsewhere, "key", "generate", "--out", other, "--name", "test.example/ledger",
                    "--root", project.root]).exit_code == 0
    project.append(runs_and_grades(2, start=30))
    r = project.cli("checkpoint", "--key", other)
    assert r.exit_code == 0, r.output
    assert "is not a key this workspace trusts" in r.stderr and "--key" in r.stderr, r.stderr
