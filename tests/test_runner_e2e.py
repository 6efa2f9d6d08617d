"""End to end on a real board: `cbledger run` with the gold and noop agents, then everything a
published number leans on is checked from the outside — the recorded stamp against the tools
actually installed, the stats against the preserved transcript, the SHAs against the preserved
commits, the evidence digests against the preserved bytes, the recorded grade against a fresh
re-grade of the restored run, and the size of what was kept against the size of the board.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess

import pygit2
import pytest
from blake3 import blake3

from cbledger.ledger.events import SCHEMA_VERSION
from cbledger.ledger.verify import verify_chain
from cbledger.runner import preserve, rescore
from cbledger.runner.sandbox import seed_commit
from cbledger.tasks.catalog import Catalog
from cbledger.workspace import Workspace
from tests.runner_project import MIC_FIXTURE, MIC_SCH, REFUSAL_TASK, RENAME_TASK, build_project

pytestmark = [pytest.mark.slow, pytest.mark.kicad, pytest.mark.shared]


def tree_hash(root) -> str:
    """The standard's fixture tree hash, written out again here so the test does not trust the
    implementation it checks."""
    files = sorted((p.relative_to(root).as_posix(), p.read_bytes()) for p in root.rglob("*") if p.is_file())
    h = hashlib.sha256()
    for rel, data in sorted(files, key=lambda f: f[0].encode()):
        h.update(rel.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


def manifest_hash(task_dir) -> str:
    return hashlib.sha256(
        b"task.json\0" + (task_dir / "task.json").read_bytes() + b"assertions.json\0" + (task_dir / "assertions.json").read_bytes()
    ).hexdigest()


@pytest.fixture(scope="module")
def project(tmp_path_factory, shared_real, kicad_cli):
    p = build_project(tmp_path_factory.mktemp("e2e"), shared_real)
    for agent in ("gold", "noop"):
        result = p.run("--suite", "smoke", "--agent", agent)
        assert result.exit_code == 0, result.output
    return p


def by_mode(project, mode):
    grades = {g.run_id: g for g in project.grades()}
    return {r.task.id: (r, grades[r.run_id]) for r in project.runs() if r.run_mode == mode}


def test_gold_passes_every_task_and_noop_fails_each_for_the_right_reason(project):
    gold, noop = by_mode(project, "gold"), by_mode(project, "noop")
    assert set(gold) == set(noop) == {RENAME_TASK, REFUSAL_TASK}
    for task, (_, g) in gold.items():
        assert g.verdict == "pass", (task, [(a.id, a.detail) for a in g.assertions if a.status == "fail"])
        assert g.partial_credit == 1.0 and g.failure_category is None
    _, rename = noop[RENAME_TASK]
    assert rename.verdict == "fail" and rename.first_failed_required == "new-net-exists"
    assert rename.failure_category == "wrong-target"
    _, refusal = noop[REFUSAL_TASK]
    cites = {a.id: a for a in refusal.assertions}["refusal-cites-the-budget"]
    assert refusal.verdict == "fail" and cites.status == "fail" and "not a refusal" in cites.detail
    # the noop changed nothing, so everything about the tree itself still passes
    assert {a.id for a in refusal.assertions if a.status == "fail"} == {"refused", "refusal-cites-the-budget"}


def test_each_run_appends_its_two_events_as_one_batch(project):
    stored = project.events()
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    assert verify_chain(project.ledger).ok
    runs = [e for e in stored if e.body.__class__.__name__ == "RunRecorded"]
    assert len(runs) == 4
    for ev in runs:
        following = stored[ev.seq]  # seq is 1-based: this is the next event
        assert following.id == f"grade:{ev.body.run_id}:1.0.0" and following.body.run_id == ev.body.run_id
        assert ev.id == f"run:{ev.body.run_id}" and ev.actor.kind == "runner"


def test_run_carries_the_full_comparability_stamp(project):
    kicad_version = re.search(r"\d+\.\d+(\.\d+)?", subprocess.run(["kicad-cli", "version"], capture_output=True, text=True).stdout).group(0)
    node = shutil.which("node")
    node_version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip() if node else None
    fixture_tree = project.root / "fixtures" / MIC_FIXTURE / "tree"
    for run in project.runs():
        c = run.comparability
        assert c.schema_version == SCHEMA_VERSION
        assert c.suite_version == "1.0.0"
        assert c.task_manifest_hash == run.task.manifest_hash == manifest_hash(project.root / "tasks" / run.task.id)
        assert c.fixture_sha256 == run.fixture.sha256 == tree_hash(fixture_tree)
        assert c.kicad_cli_version == kicad_version
        assert c.runtime == f"{platform.python_implementation().lower()}-{platform.python_version()}"
        assert c.node_version == node_version
        assert c.platform and c.platform.startswith(("linux-", "darwin-"))
        assert c.copperhead_version is None and c.copperhead_commit is None  # scripted agents
        assert run.llm_cache is False
        assert run.model.id == f"harness:{run.run_mode}" and run.model.segment == "harness"
        assert run.cost.usd_micros is None
        assert run.lane == "system-under-test"  # the billed lane of its calls (none, for a scripted agent)
        assert run.surface == "scripted-harness-agents"


def restored(project, run):
    catalog = Catalog(project.root)
    return preserve.restore(project.root / run.sandbox.store, run.sandbox, catalog.fixture(run.fixture.id))


def test_shas_stats_and_digests_match_the_preserved_run(project):
    catalog = Catalog(project.root)
    for run in project.runs():
        ref = run.sandbox
        r = restored(project, run)
        try:
            repo = r.repo
            # the seed rebuilds from the fixture alone, in an unrelated repository
            scratch = pygit2.init_repository(str(r.path / "scratch"), bare=True)
            assert str(seed_commit(scratch, catalog.fixture(run.fixture.id), ref.seed_config.encode())) == ref.seed_sha
            assert ref.baseline_sha == ref.seed_sha  # no setup commands
            capture = repo[ref.capture_sha]
            evidence = repo[ref.evidence_sha]
            assert [str(p) for p in capture.parent_ids] == [ref.head_sha]
            assert [str(p) for p in evidence.parent_ids] == [ref.capture_sha]
            head = repo[ref.head_sha]
            if run.run_mode == "gold" and run.task.id == RENAME_TASK:
                assert [str(p) for p in head.parent_ids] == [ref.baseline_sha]
            else:
                assert ref.head_sha == ref.baseline_sha
            config = json.loads(ref.seed_config)
            assert config["llmCache"] is False and config["maxTurns"] == 40

            # evidence digests: the transcript in the captured end state, the reports in the
            # evidence commit, byte for byte
            assert set(run.evidence) == {"transcript", "erc", "drc"}
            transcript_path = run.evidence["transcript"].path
            assert transcript_path.startswith(".copperhead/runs/") and transcript_path.endswith("/transcript.jsonl")
            blobs = {
                "transcript": (capture.tree / transcript_path).data,
                "erc": (evidence.tree / "erc.json").data,
                "drc": (evidence.tree / "drc.json").data,
            }
            for name, data in blobs.items():
                digest = run.evidence[name]
                assert digest.blake3 == blake3(data).hexdigest() and digest.bytes == len(data), name

            # stats are the transcript's run-end, as preserved
            events = [json.loads(line) for line in blobs["transcript"].decode().splitlines()]
            end = events[-1]["data"]
            assert events[-1]["type"] == "run-end"
            s = run.stats
            assert (s.exit_path, s.turns_used, s.max_turns, s.tokens_in, s.tokens_out, s.repair_cycles_used, s.max_repair_cycles) == (
                end["exitPath"], end["turnsUsed"], end["maxTurns"], end["tokensIn"], end["tokensOut"], end["repairCyclesUsed"], end["maxRepairCycles"],
            )
            committed = [f for e in events if e["type"] == "run-committed" for f in e["data"]["files"]]
            assert s.files_touched == sorted(committed)
            if run.run_mode == "gold" and run.task.id == RENAME_TASK:
                assert s.files_touched == ["docs/PINOUT.md", MIC_SCH] and s.tokens_in == 12000
        finally:
            shutil.rmtree(r.path, ignore_errors=True)


def test_restored_bundle_regrades_to_the_recorded_grade(project):
    catalog = Catalog(project.root)
    grades = {g.run_id: g for g in project.grades()}
    for run in project.runs():
        again = rescore.regrade(Workspace.at(project.root), catalog, run)
        recorded = grades[run.run_id]
        assert list(again.outcomes) == recorded.assertions
        assert (again.verdict, again.partial_credit, again.first_failed_required, again.failure_category) == (
            recorded.verdict, recorded.partial_credit, recorded.first_failed_required, recorded.failure_category,
        )


def test_preserved_bytes_are_a_small_fraction_of_the_board(project):
    tree = project.root / "fixtures" / MIC_FIXTURE / "tree"
    board_bytes = sum(p.stat().st_size for p in tree.rglob("*") if p.is_file())
    assert board_bytes > 900_000
    runs = project.runs()
    assert sorted(b.name for b in project.bundles()) == sorted(f"{r.run_id}.bundle" for r in runs)
    assert project.staged() == []
    for run in runs:
        bundle = project.root / run.sandbox.store
        data = bundle.read_bytes()
        assert run.sandbox.store_bytes == len(data) and run.sandbox.store_blake3 == blake3(data).hexdigest()
        assert len(data) < 0.02 * board_bytes, (run.run_id, len(data), board_bytes)


def test_replay_agent_regrades_a_preserved_run_identically(project):
    result = project.run("--suite", "smoke", "--agent", "replay", "--model", "harness:gold")
    assert result.exit_code == 0, result.output
    gold = by_mode(project, "gold")
    replays = by_mode(project, "replay")
    assert set(replays) == set(gold)
    for task, (run, g) in replays.items():
        source, source_grade = gold[task]
        assert run.runner_note == f"replay of run {source.run_id}" and run.replay_of == source.run_id
        assert run.model == source.model and run.cost == source.cost
        assert run.sandbox.head_sha == source.sandbox.head_sha  # the model's commits, put back
        assert run.sandbox.seed_sha == source.sandbox.seed_sha
        assert run.evidence["transcript"].blake3 == source.evidence["transcript"].blake3
        assert g.assertions == source_grade.assertions and g.verdict == source_grade.verdict == "pass"


def test_the_test_project_is_a_valid_project(project):
    """Valid but for the one rule a runner fixture need not meet: it holds an edit and a refusal
    task and no flag task, which `validate` reports for the catalog and for the suite, and nothing
    else."""
    result = project.cli("validate")
    assert result.exit_code == 1 and "2 error(s), 0 warning(s)" in result.stdout, result.output
    assert "error: tasks: the catalog holds no flag task" in result.stderr
    assert "error: suites/smoke.json: tasks: suite 'smoke' holds no flag task" in result.stderr


def test_a_run_restores_by_hand_with_git_alone(project, tmp_path):
    """The procedure docs/RUNNER.md gives, step by step, with the git command line only."""
    run = next(r for r in project.runs() if r.run_mode == "gold" and r.task.id == RENAME_TASK)
    ref = run.sandbox
    work = tmp_path / "restored"
    env = {
        **os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "cbledger", "GIT_AUTHOR_EMAIL": "cbledger@copperbench.invalid", "GIT_AUTHOR_DATE": "946684800 +0000",
        "GIT_COMMITTER_NAME": "cbledger", "GIT_COMMITTER_EMAIL": "cbledger@copperbench.invalid", "GIT_COMMITTER_DATE": "946684800 +0000",
    }

    def git(*args):
        return subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True, text=True).stdout.strip()

    work.mkdir()
    git("init", "-q")
    shutil.copytree(project.root / "fixtures" / MIC_FIXTURE / "tree", work, dirs_exist_ok=True)
    (work / ".copperhead" / "config.json").write_text(ref.seed_config)
    git("-c", "core.autocrlf=false", "add", "-A", "-f", ".")
    git("-c", "commit.gpgsign=false", "commit", "-q", "-m", f"seed: fixture {MIC_FIXTURE} {run.fixture.sha256}")
    assert git("rev-parse", "HEAD") == ref.seed_sha
    git("fetch", "-q", str(project.root / ref.store), "refs/cbledger/*:refs/cbledger/*")
    assert git("rev-parse", "refs/cbledger/evidence") == ref.evidence_sha
    assert git("rev-parse", "refs/cbledger/evidence^") == ref.capture_sha
    git("checkout", "-q", "--detach", ref.head_sha)
    git("restore", "--source=refs/cbledger/evidence^", "--worktree", "--staged", "--", ".")
    assert (work / run.evidence["transcript"].path).is_file()
    assert b'(label "PDM_DATA"' in (work / MIC_SCH).read_bytes()

    graded = project.cli("grade", RENAME_TASK, str(work), "--baseline", ref.baseline_sha, "--json")
    assert graded.exit_code == 0, graded.output
    recorded = next(g for g in project.grades() if g.run_id == run.run_id)
    assert json.loads(graded.stdout)["verdict"] == recorded.verdict == "pass"
