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
