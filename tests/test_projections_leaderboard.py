"""LEADERBOARD.md: golden files, markers, and byte-identity across machines.

The golden files under tests/golden/ are regenerated only deliberately:

    CBLEDGER_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_projections_leaderboard.py

then review the diff like any other change to published output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cbledger.projections import leaderboard
from cbledger.projections.fold import fold
from tests.factories import Stream, conditions_stream, rich_stream

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("CBLEDGER_UPDATE_GOLDEN") == "1"

CASES = {
    "LEADERBOARD.md": (rich_stream, None),  # the current suite (1.1.0: two re-grades)
    "LEADERBOARD-suite-1.0.0.md": (rich_stream, "1.0.0"),
    # ablation conditions, batches, an OS, a provider that named another model
    "LEADERBOARD-conditions.md": (conditions_stream, None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name):
    stream, suite = CASES[name]
    text = leaderboard.render(fold(stream().events), suite)
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == text, (
        f"{name} differs from its golden file; if the change is intended, regenerate with "
        "CBLEDGER_UPDATE_GOLDEN=1 and review the diff"
    )


def test_markers_and_snapshot_facts():
    s = rich_stream()
    state = fold(s.events)
    text = leaderboard.render(state)
    lines = text.splitlines()
    assert lines[0] == leaderboard.BEGIN and lines[-1] == leaderboard.END and text.endswith("\n")
    assert "| Suite version | `1.1.0` (the current suite: latest `suite.bumped`, seq" in text
    assert f"| Ledger head | seq {state.head_seq}," in text
    assert "| Snapshot date | 2026-09-06 (time of the last ledger event: " in text
    assert "| Records | 2 graded under this suite version; 84 across all suite versions |" in text


def test_the_non_claims_and_each_groups_reference_environment_are_stated():
    text = leaderboard.render(fold(conditions_stream().events))
    claims = text.split("## What these numbers do not claim", 1)[1].split("\n## ", 1)[0]
    for part in ("not fabrication readiness", "not design quality", "not general model capability",
                 "not the speed of kicad-cli or copperhead"):
        assert f"**{part}**" in claims
    main = text.split("## Main comparability group", 1)[1].split("\n## ", 1)[0]
    env = main.split("### Reference environment", 1)[1].split("\n### ", 1)[0]
    assert "| `9.0.8` | `0.9.0` | `a2471b374ac1904e1a8dfc9f1b4fa6a2ef87acd8` | `v22.17.0` | `linux-x64` | `Debian GNU/Linux 12 (bookworm)` | 6 |" in env
    assert "| `9.0.8` | `0.9.0` | not recorded | `v22.17.0` | `linux-x64` | not recorded | 5 |" in env
    # every separate group states its own
    suite_1 = leaderboard.render(fold(rich_stream().events), "1.0.0")
    others = suite_1.split("## Other comparability groups", 1)[1].split("\n## ", 1)[0]
    assert others.count("#### Reference environment") == 2 and "| `8.0.4` |" in others


def test_empty_ledger_renders():
    text = leaderboard.render(fold(Stream().events))
    assert "no suite version yet" in text and text.endswith(leaderboard.END + "\n")


_RENDER = (
    "import sys; sys.path.insert(0, sys.argv[1]);"
    "from tests.factories import rich_stream;"
    "from cbledger.projections.fold import fold;"
    "from cbledger.projections import leaderboard;"
    "sys.stdout.buffer.write(leaderboard.render(fold(rich_stream().events), '1.0.0').encode())"
)


@pytest.mark.parametrize(
    "env",
    [
        {"TZ": "Pacific/Kiritimati", "LC_ALL": "de_DE.UTF-8", "PYTHONHASHSEED": "1"},
        {"TZ": "America/St_Johns", "LANG": "fr_FR.UTF-8", "PYTHONHASHSEED": "4242"},
    ],
)
def test_byte_identical_under_another_timezone_locale_and_hash_seed(env):
    repo = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", _RENDER, str(repo)],
        env={**os.environ, **env}, capture_output=True, check=True,
    ).stdout
    assert out == (GOLDEN / "LEADERBOARD-suite-1.0.0.md").read_bytes()
