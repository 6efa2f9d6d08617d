"""`cbledger task variant`: generated memorization variants of the bundled synthetic tasks.

Property tests over random seeds (hypothesis) check that a variant is deterministic (the same seed
gives the same bytes), distinct from its original (every file a model reads differs, every part
and signal net is renamed where it can be), and solvable (the transformed gold passes and noop
fails, graded through the real runner on a kicad-cli baseline). A fixed-seed variant of every
bundled synthetic edit task also goes through `fixture check --kicad` and real `cbledger run
--agent gold|noop` runs. Each test builds its project from the committed synthetic data.
"""

from __future__ import annotations

import json
import re
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cbledger.errors import UserError
from cbledger.kicad.rewrite import check_rewrite, rewrite
from cbledger.tasks.catalog import Catalog
from cbledger.tasks.fixtures.freeze import Recipe
from cbledger.tasks.fixtures.hashing import tree_files
from cbledger.tasks.variant import generate as gen
from cbledger.tasks.variant.quantities import quantity_edits, scale_value
from tests.factories import run_cli

REPO = Path(__file__).resolve().parent.parent
EDIT_TASKS = ["led-resistor-swap", "mcu-rename-i2c-nets", "mcu-add-decoupling-cap", "hier-sequence-rail-b"]
SEEDS = st.integers(min_value=0, max_value=10**6)
FAST = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SLOW = settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def copy_task(root: Path, task_id: str) -> None:
    task = Catalog(REPO).task(task_id)
    if not (root / "tasks" / task_id).exists():
        shutil.copytree(task.dir, root / "tasks" / task_id)
    fixture = task.manifest.fixture.id
    if not (root / "fixtures" / fixture).exists():
        shutil.copytree(REPO / "fixtures" / fixture, root / "fixtures" / fixture)


def project_with(tmp_path: Path, *task_ids: str) -> Path:
    root = tmp_path / "project"
    root.mkdir(exist_ok=True)
    for t in task_ids:
        copy_task(root, t)
    return root


def tree_bytes(d: Path) -> dict[str, bytes]:
    return {rel: (d / rel).read_bytes() for rel in tree_files(d)}


def generated_bytes(made: gen.Generated) -> dict[str, bytes]:
    out = {f"task/{k}": v for k, v in tree_bytes(made.task_dir).items()}
    out.update({f"fixture/{k}": v for k, v in tree_bytes(made.fixture_dir).items()})
    return out


# --------------------------------------------------------------------------- properties, no kicad-cli


def test_every_committed_variant_is_what_its_original_generates_today(tmp_path):
    """A variant is generated, never edited: one left behind when its original changed is easier
    or harder than it, and skews the variant gap. led-resistor-swap-v1 once lacked the
    copperhead-check its original gained. (The baseline reports, measured by kicad-cli, and the
    fixture manifest holding their summary are left out: `fixture check` covers them.)"""
    catalog = Catalog(REPO)
    variants = [t for t in catalog.task_ids() if catalog.task(t).manifest.variant_of]
    assert len(variants) == 4, variants
    for variant in variants:
        task = catalog.task(variant)
        original, seed = task.manifest.variant_of, int(variant.rsplit("-v", 1)[1])
        assert original is not None and gen.variant_ids(original, seed)[0] == variant
        (tmp_path / variant).mkdir()
        made = gen.generate(project_with(tmp_path / variant, original), original, seed)
        fixture = catalog.fixture_for(task).dir
        for name, ours, theirs in (("task", made.task_dir, task.dir), ("fixture tree", made.fixture_dir / "tree", fixture / "tree")):
            fresh = {k: v for k, v in tree_bytes(ours).items() if k != gen.INCOMPLETE}
            stale = sorted(k for k in fresh.keys() | tree_bytes(theirs).keys() if fresh.get(k) != tree_bytes(theirs).get(k))
            assert not stale, (f"{variant}: its {name} differs from what `cbledger task variant {original} --seed {seed} "
                               f"--replace` writes today: {stale}")


@FAST
@given(seed=SEEDS, task_id=st.sampled_from(EDIT_TASKS))
def test_the_same_seed_gives_the_same_bytes(tmp_path_factory, seed, task_id):
    roots = [project_with(tmp_path_factory.mktemp("a"), task_id), project_with(tmp_path_factory.mktemp("b"), task_id)]
    made = [gen.generate(r, task_id, seed) for r in roots]
    assert generated_bytes(made[0]) == generated_bytes(made[1])
    # and again in place, over what the first run wrote
    again = gen.generate(roots[0], task_id, seed, replace=True)
    assert generated_bytes(again) == generated_bytes(made[1])


@FAST
@given(seed=SEEDS, task_id=st.sampled_from(EDIT_TASKS))
@example(seed=209092, task_id="mcu-rename-i2c-nets")  # drew U1 and U2 onto themselves; CHANGELOG.md names no other
def test_a_variant_differs_from_its_original_everywhere_a_model_reads(tmp_path_factory, seed, task_id):
    root = project_with(tmp_path_factory.mktemp("p"), task_id)
    made = gen.generate(root, task_id, seed)
    catalog = Catalog(root)
    original, variant = catalog.task(task_id), catalog.task(made.task_id)
    assert variant.manifest.variant_of == task_id and "memorization-variant" in variant.manifest.tags
    assert variant.manifest.request.prompt != original.manifest.request.prompt
    before = tree_bytes(catalog.fixture_for(original).tree)
    after = tree_bytes(root / variant.manifest.fixture.path / "tree")  # its baseline is measured later
    assert sorted(before) == sorted(after)  # the same files, as the assertions name them
    # a document naming nothing the draw moved (the seed drew U1 onto U1, say, and it names U1
    # alone) is the same text: the rest must differ
    moved = [a for a, b in made.mapping.refdes.items() if a != b] + list(made.mapping.nets)
    for rel in before:
        names_moved = any(re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", before[rel].decode("utf-8", "replace")) for n in moved)
        if rel.endswith((".kicad_sch", ".kicad_pcb")) or (rel.startswith("docs/") and names_moved):
            assert before[rel] != after[rel], rel
    # every reference designator is renamed or (rarely) drawn onto its own number, never merged
    assert len(set(made.mapping.refdes.values())) == len(made.mapping.refdes)
    assert any(a != b for a, b in made.mapping.refdes.items())
    assert all(b != a for a, b in made.mapping.nets.items())
    assert made.mapping.k in (Decimal(2), Decimal("0.5"))
    budgets = original.manifest.config.budgets
    scaled = variant.manifest.config.budgets
    for key, value in budgets.items():
        if key.endswith("_ma"):
            assert scaled[key] == value * float(made.mapping.k)
        elif key.endswith("_v"):
            assert scaled[key] == value


@pytest.mark.parametrize(("task", "fixture", "why"), [
    ("mic-standby-budget-record", "antmicro-microphone-board", "a real board: its files are third-party data"),
    ("led-indicator-create", "synthetic-led-create", "is a create task: its gold holds a fabrication package"),
])
def test_a_real_board_or_create_task_is_refused_and_nothing_is_written(tmp_path, task, fixture, why):
    root = tmp_path / "project"
    shutil.copytree(REPO / "tasks" / task, root / "tasks" / task)
    fx = root / "fixtures" / fixture
    fx.mkdir(parents=True)
    shutil.copyfile(REPO / "fixtures" / fixture / "fixture.json", fx / "fixture.json")
    with pytest.raises(UserError, match=why):
        gen.generate(root, task, 1)
    assert sorted(p.name for p in (root / "tasks").iterdir()) == [task]
    assert sorted(p.name for p in fx.iterdir()) == ["fixture.json"]


def test_a_task_on_a_local_board_of_the_projects_own_gets_variants_as_a_synthetic_ones_does(tmp_path):
    """A board the author froze from a repository of their own is `local`, committed like a
    synthetic one: refusing it as third-party data said something false and left every
    author-frozen board without memorization variants."""
    root = project_with(tmp_path, "led-resistor-swap")
    manifest = root / Catalog(root).task("led-resistor-swap").manifest.fixture.path / "fixture.json"
    doc = json.loads(manifest.read_text())
    doc["origin"] = "local"
    doc["freeze"] = Recipe((".",), None, None).to_json()  # as `fixture freeze` wrote it
    manifest.write_text(json.dumps(doc, indent=2) + "\n")
    made = gen.generate(root, "led-resistor-swap", 4)
    gen.finish(made)
    variant = Catalog(root).task(made.task_id)
    assert variant.manifest.variant_of == "led-resistor-swap"
    # a generated tree no freeze made: no recipe, so `fixture freeze` will not freeze over it
    assert "freeze" not in json.loads((root / variant.manifest.fixture.path / "fixture.json").read_text())


def test_a_variant_of_a_variant_and_an_existing_variant_are_refused(tmp_path):
    root = project_with(tmp_path, "led-resistor-swap")
    made = gen.generate(root, "led-resistor-swap", 4)
    gen.finish(made)
    with pytest.raises(UserError, match="itself a variant of led-resistor-swap"):
        gen.generate(root, made.task_id, 1)
    with pytest.raises(UserError, match="exists already"):
        gen.generate(root, "led-resistor-swap", 4)


@pytest.mark.parametrize("seed", [str(2**32), str(10**30)])
def test_a_seed_past_the_bound_is_refused_and_nothing_is_written(tmp_path, seed):
    """`--seed 10**30` once ran past a minute and, killed, left a partial task behind."""
    root = project_with(tmp_path, "led-resistor-swap")
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    r = run_cli(["task", "variant", "led-resistor-swap", "--seed", seed, "--root", root])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    with pytest.raises(UserError, match="a seed is an integer from 0 to 4294967295"):
        gen.generate(root, "led-resistor-swap", int(seed))


def test_a_variant_killed_before_its_trial_passed_is_no_task_and_the_next_run_replaces_it(tmp_path):
    from cbledger.tasks import definitions
    from cbledger.tasks.validate import validate_project

    root = project_with(tmp_path, "led-resistor-swap")
    (root / "suites").mkdir()
    made = gen.generate(root, "led-resistor-swap", 5)  # and then a SIGKILL: never finished
    catalog = Catalog(root)
    assert made.task_id not in catalog.task_ids() and made.fixture_id not in catalog.fixture_ids()
    assert made.task_id not in definitions.DirectorySource(root).dirs("tasks")
    assert not any(made.task_id in str(p) for p in validate_project(root).problems)
    # nor does a command naming it by id (once: `fixture check` said ok, `task variant` "is itself a variant")
    with pytest.raises(UserError, match="an unfinished variant"):
        gen.generate(root, made.task_id, 1)
    checked = run_cli(["fixture", "check", made.fixture_id, "--root", root])
    assert checked.exit_code == 2 and "an unfinished variant's fixture" in checked.stderr, checked.output
    again = gen.generate(root, "led-resistor-swap", 5)  # no --replace needed for a leftover
    gen.finish(again)
    assert made.task_id in Catalog(root).task_ids() and not (again.task_dir / ".incomplete").exists()


def test_sigterm_during_the_trial_takes_the_variant_out(tmp_path, monkeypatch):
    import os
    import signal

    from cbledger.runner import trial

    root = project_with(tmp_path, "led-resistor-swap")
    monkeypatch.setattr("cbledger.tasks.fixtures.baseline.measure", lambda d: os.kill(os.getpid(), signal.SIGTERM))
    monkeypatch.setattr(trial, "run_trials", lambda *a, **k: pytest.fail("the trial ran after SIGTERM"))
    r = run_cli(["task", "variant", "led-resistor-swap", "--seed", "6", "--root", root])
    assert r.exit_code == 128 + signal.SIGTERM
    assert sorted(p.name for p in (root / "tasks").iterdir()) == ["led-resistor-swap"]
    assert not (root / "fixtures" / "variant-led-resistor-swap-v6").exists()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the command's handler is gone again


@pytest.mark.kicad
def test_a_variant_made_again_keeps_its_measured_reports_byte_for_byte(tmp_path, kicad_cli):
    """`task variant --seed N --replace` removed the reports before measuring again, so each
    came back with kicad-cli's new time stamp, and validate then asked for a suite bump."""
    import time

    from cbledger.tasks.fixtures import baseline, summary

    root = project_with(tmp_path, "led-resistor-swap")
    made = gen.generate(root, "led-resistor-swap", 1)
    baseline.measure(made.fixture_dir, kicad_cli)
    files = (*summary.REPORT_FILES.values(), summary.NETLIST_FILE)
    first = {rel: (made.fixture_dir / rel).read_bytes() for rel in files if (made.fixture_dir / rel).is_file()}
    assert summary.REPORT_FILES["erc"] in first
    time.sleep(1.1)  # a stamp of its own, to the second
    again = gen.generate(root, "led-resistor-swap", 1, replace=True)
    baseline.measure(again.fixture_dir, kicad_cli)
    assert {rel: (again.fixture_dir / rel).read_bytes() for rel in first} == first


def test_a_trial_without_copperhead_names_it_not_the_task(tmp_path, monkeypatch, kicad_cli):
    """With no copperhead CLI anywhere, a variant's trial said "not solvable as generated … gold
    fail (first failed: copperhead-check)" and the bump "the scripted agents do not separate" it."""
    from cbledger.runner import trial

    root = project_with(tmp_path, "led-resistor-swap")
    monkeypatch.delenv("COPPERHEAD_CLI", raising=False)
    with pytest.raises(UserError, match=r"no copperhead CLI .*led-resistor-swap needs it .*nothing tried"):
        trial.run_trials(root, ["led-resistor-swap"])
    r = run_cli(["task", "variant", "led-resistor-swap", "--seed", "9", "--root", root])
    assert r.exit_code == 2 and "no copperhead CLI" in r.stderr and "not solvable" not in r.output, r.output
    assert sorted(p.name for p in (root / "tasks").iterdir()) == ["led-resistor-swap"]  # the variant taken out


def test_a_bare_number_the_task_never_places_is_refused_not_guessed(tmp_path):
    root = project_with(tmp_path, "mcu-pullup-drift-flag")
    with pytest.raises(UserError, match="holds the bare number 000, which the task never writes with one unit"):
        gen.generate(root, "mcu-pullup-drift-flag", 1)
    assert sorted(p.name for p in (root / "tasks").iterdir()) == ["mcu-pullup-drift-flag"]
    assert sorted(p.name for p in (root / "fixtures").iterdir()) == ["synthetic-mcu-sensor-drift"]


# --------------------------------------------------------------------------- the pieces


def scaled(text: str, k: str, budgets: dict | None = None) -> str:
    out, cursor = [], 0
    for start, end, new in quantity_edits(text, Decimal(k), budgets or {}):
        out += [text[cursor:start], new]
        cursor = end
    return "".join([*out, text[cursor:]])


@pytest.mark.parametrize(
    ("text", "k", "expected"),
    [
        ("R1 = 1k ohm gives (5.0 - 2.0) / 1000 = 3.00 mA, inside the 5 mA budget", "2",
         "R1 = 0.5k ohm gives (5.0 - 2.0) / 500 = 6.00 mA, inside the 10 mA budget"),
        ("150 + 100 = 250 mA (plus 0.2 mA), leaving 150 mA", "0.5", "75 + 50 = 125 mA (plus 0.1 mA), leaving 75 mA"),
        ("300 ns / (0.8473 x 50 pF) = 7.1 kohm", "2", "300 ns / (0.8473 x 100 pF) = 3.55 kohm"),
        ("(1000 to 4700 ohm), 400 kHz, 7-bit 0x48, 2026-10-01, Vf 2.0 V, 80 %", "0.5",
         "(2000 to 9400 ohm), 400 kHz, 7-bit 0x48, 2026-10-01, Vf 2.0 V, 80 %"),
    ],
)
def test_quantities_scale_so_every_stated_relation_still_holds(text, k, expected):
    assert scaled(text, k) == expected


def test_a_budget_row_scales_its_bare_limits():
    row = "| `i2c_pullup_ohms` | min 1000, max 4700 | basis 3 mA |\n| `supply_v` | 3.3 V | J1 |\n"
    assert scaled(row, "2", {"i2c_pullup_ohms": "resistance"}) == (
        "| `i2c_pullup_ohms` | min 500, max 2350 | basis 6 mA |\n| `supply_v` | 3.3 V | J1 |\n"
    )


def test_values_scale_by_the_part_they_belong_to():
    k = Decimal("0.5")
    assert [scale_value(v, p, k) for v, p in [("1k", "R"), ("680", "R"), ("100nF", "C"), ("500mA", "F"), ("LED", "D"), ("10k", "U")]] == [
        "2k", "1360", "50nF", "250mA", None, None,
    ]


def test_a_rewrite_changes_only_the_strings_chosen():
    text = '(kicad_sch\n\t(symbol (property "Reference" "R1" (at 1 2 0)))\n\t(label "A\\"B" (at 3 4 0))\n)\n'
    out = rewrite(text, "t.kicad_sch", lambda atom, i, form, parents: {"R1": "R7", 'A"B': 'C"D'}.get(atom))
    assert out == '(kicad_sch\n\t(symbol (property "Reference" "R7" (at 1 2 0)))\n\t(label "C\\"D" (at 3 4 0))\n)\n'
    check_rewrite(text, out, "t.kicad_sch")
    with pytest.raises(UserError, match="changed more than strings"):
        check_rewrite(text, text.replace("(at 1 2 0)", "(at 1 3 0)"), "t.kicad_sch")


# --------------------------------------------------------------------------- solvable, through kicad-cli and the runner


@SLOW
@given(seed=SEEDS, task_id=st.sampled_from(EDIT_TASKS))
def test_a_variant_at_any_seed_is_solved_by_its_transformed_gold(tmp_path_factory, kicad_cli, copperhead_cli, seed, task_id):
    from cbledger.runner.trial import run_trials
    from cbledger.tasks.fixtures.baseline import measure

    root = project_with(tmp_path_factory.mktemp("s"), task_id)
    made = gen.generate(root, task_id, seed)
    measure(made.fixture_dir)
    # the CLI runs the `copperhead check` a check_clean assertion (led-resistor-swap's) grades
    results = {r.agent: r for r in run_trials(root, [made.task_id], copperhead_cli=str(copperhead_cli))}
    assert results["gold"].verdict == "pass", results["gold"]
    assert results["noop"].verdict == "fail"


@pytest.mark.parametrize("task_id", EDIT_TASKS)
def test_every_bundled_synthetic_edit_task_has_a_variant_that_gold_passes_and_noop_fails(tmp_path, kicad_cli, copperhead_cli, task_id):
    root = project_with(tmp_path, task_id)
    (root / "suites").mkdir()
    r = run_cli(["task", "variant", task_id, "--seed", "7", "--root", root, "--copperhead-cli", copperhead_cli])
    assert r.exit_code == 0, r.stderr
    variant = f"{task_id}-v7"
    assert f"trial {variant}: gold pass, expected pass" in r.stdout
    check = run_cli(["fixture", "check", f"variant-{variant}", "--kicad", "--root", root])
    assert check.exit_code == 0, check.stdout + check.stderr
    manifest = json.loads((root / "fixtures" / f"variant-{variant}" / "fixture.json").read_text())
    assert manifest["kicad"]["verifiedWithKicadCli"] and manifest["baseline"]["erc"]["report"] == "baseline/erc.json"
    for args in (("init",), ("suite", "bump", "--reason", "the variant under test", "--skip-trial")):
        assert run_cli([*args, "--root", root]).exit_code == 0
    for agent, verdict in (("gold", "pass"), ("noop", "fail")):
        run = run_cli(["run", variant, "--agent", agent, "--repeats", "1", "--no-project", "--root", root, "--sandbox-root", tmp_path / agent,
                       "--copperhead-cli", copperhead_cli])
        assert run.exit_code == 0, run.stderr
        assert f"1 run(s) recorded: {1 if verdict == 'pass' else 0} pass" in run.stdout


@pytest.mark.parametrize(("pattern", "expected"), [
    (r"\b1k\b", r"\b0.5k\b"),              # a unit right after the number, then an escape
    (r"1\.2k", r"0\.6k"),                  # an escaped decimal point is the number's own
    (r"1.2 ?k", r"0.6 ?k"),                # an optional space between number and unit
    (r"4\.7\s*kohm", r"2\.35\s*kohm"),
    (r"= 10 ?mA", r"= 20 ?mA"),
    (r"C4\.1", r"C4\.1"),                  # a pin stays a pin
    (r"\b2x\b|\b3rd\b|10Hz", r"\b2x\b|\b3rd\b|10Hz"),  # a number running into a word is no quantity
])
def test_a_regex_quantity_is_scaled_however_the_author_spelled_it(pattern, expected):
    """`\\b1k\\b` and `1\\.2k` were left as they were (a unit right after the number was read as a
    name, an escaped point as a pin's), so the variant's gold failed its own regex with nothing
    saying which."""
    from cbledger.tasks.variant.mapping import VariantMap

    vm = VariantMap(seed=1, refdes={}, nets={}, k=Decimal(2), values={}, budget_families={})
    assert gen._pattern(pattern, vm, "assertions.json", {}) == expected
