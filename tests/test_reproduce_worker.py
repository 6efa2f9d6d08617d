"""A `replay --verify --jobs N` worker imports the re-grade and not the command line: a spawned
worker would otherwise import the parent's main module first (for the `cbledger` console script,
the whole CLI and everything it imports)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_a_spawned_worker_imports_neither_the_parents_main_module_nor_the_cli(tmp_path):
    script = tmp_path / "console.py"  # stands for the console script: a main module with a file
    script.write_text(textwrap.dedent("""
        import multiprocessing, sys
        from concurrent.futures import ProcessPoolExecutor
        import cbledger.cli.app  # what the console script imports
        from cbledger.reproduce import worker

        MARK = "parent-main"
        if __name__ == "__main__":
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(2, mp_context=ctx) as pool, worker.as_main():
                seen = [pool.submit(eval, "(sorted(__import__('sys').modules), "
                                          "__import__('sys').modules['__mp_main__'].__name__, "
                                          "hasattr(__import__('sys').modules['__mp_main__'], 'MARK'))") for _ in range(2)]
                results = [f.result() for f in seen]
            assert sys.modules["__main__"].__spec__ is None, "the parent's main module is left as it was"
            for modules, main_name, marked in results:
                print("cli" if any(m.startswith("cbledger.cli") for m in modules) else "no-cli",
                      "worker" if "cbledger.reproduce.runs" in modules else "no-worker", main_name, marked)
    """))
    out = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["no-cli worker __mp_main__ False"] * 2


def test_without_it_the_worker_would_import_the_cli(tmp_path):
    """The control: the same pool started outside `as_main()` imports the parent's main module."""
    script = tmp_path / "console.py"
    script.write_text(textwrap.dedent("""
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        import cbledger.cli.app

        if __name__ == "__main__":
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(1, mp_context=ctx) as pool:
                modules = pool.submit(eval, "sorted(__import__('sys').modules)").result()
            print(any(m.startswith("cbledger.cli") for m in modules))
    """))
    out = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_a_pool_wound_down_early_is_still_joined_whole_by_shutdown():
    """`wind_down` lets the workers exit while the parent works on; `shutdown` then joins the
    pool's manager thread, which `shutdown(wait=False)` alone would leave to the interpreter's exit."""
    from cbledger.reproduce import worker

    pool = worker.start_pool(2)
    assert sorted(f.result() for f in [pool.submit(abs, -n) for n in range(4)]) == [0, 1, 2, 3]
    manager = pool._executor_manager_thread
    processes = list(pool._processes.values())
    assert manager is not None and manager.is_alive()
    pool.wind_down()
    pool.shutdown(cancel_futures=True)
    assert not manager.is_alive()
    assert all(p.exitcode is not None for p in processes)


def test_replay_verify_with_two_jobs_exits_without_a_traceback(tmp_path):
    """As a user runs it, a process of its own: nothing on stderr but the command's own lines."""
    import os

    from cbledger.ledger.store import LedgerStore
    from tests.test_docs_commands import scratch_project

    root = scratch_project(tmp_path)
    runs = [s.event.body.run_id for s in LedgerStore(root / "results" / "ledger" / "events.jsonl").read(types={"run.recorded"})
            if s.event.body.fixture.id.startswith("synthetic-")][:4]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CBLEDGER_")}
    argv = [sys.executable, "-m", "cbledger.cli.app", "replay", "--verify", "--jobs", "2", "--no-projections", "--root", str(root)]
    done = subprocess.run([*argv, *(a for r in runs for a in ("--run", r))], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"runs: {len(runs)} checked: {len(runs)} reproduced" in done.stdout
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr[-3000:]
