"""Comparability grouping: the main group is chosen mechanically; every other group says why."""

from __future__ import annotations

from cbledger.projections.comparability import kicad_major, partition
from cbledger.projections.fold import fold
from cbledger.projections.records import record_entries
from tests.factories import Stream, h64


def groups(s: Stream, suite: str = "1.0.0"):
    state = fold(s.events)
    recs = record_entries(state, suite)
    part = partition(state, suite, recs)
    return part, {g.key: sorted(recs[i].run_id for i in g.members) for g in part.groups}, recs


def test_kicad_major():
    assert kicad_major("9.0.8") == "9"
    assert kicad_major("10.0.4") == "10"
    assert kicad_major(None) == "none"


def test_main_group_follows_the_suite_bump_even_when_outnumbered():
    s = Stream()
    s.task("t")
    s.suite("1.0.0")
    good = s.graded_run("t")
    stale = [s.graded_run("t", repeat=r, manifest=h64("old manifest")) for r in (1, 2, 3)]
    part, by_key, _ = groups(s)
    assert by_key["main"] == [good]
    [other] = [g for g in part.groups if not g.main]
    assert sorted(by_key[other.key]) == sorted(stale)
    assert other.reasons == [
        f"task manifest hash of t is {h64('old manifest')[:12]} (main group: {h64('manifest', 't')[:12]}, from suite.bumped)"
    ]


def test_without_a_bump_the_hash_most_records_carry_wins():
    s = Stream()
    majority = [s.graded_run("t", repeat=r) for r in (1, 2)]
    minority = s.graded_run("t", fixture_sha=h64("other fixture"))
    part, by_key, _ = groups(s)
    assert by_key["main"] == sorted(majority)
    [other] = [g for g in part.groups if not g.main]
    assert by_key[other.key] == [minority]
    assert "fixture hash of t (mic-board)" in other.label and "from most records" in other.label


def test_schema_and_kicad_differences_form_separate_labelled_groups():
    s = Stream()
    s.task("a")
    s.task("b")
    s.suite("1.0.0")
    main = [s.graded_run(t, repeat=r) for t in "ab" for r in (1, 2)]
    old_kicad = [s.graded_run(t, kicad="8.0.4") for t in "ab"]
    no_kicad = s.graded_run("a", kicad=None)
    old_schema = s.graded_run("b", schema_version="0.9.0")
    part, by_key, _ = groups(s)
    assert by_key["main"] == sorted(main)
    labels = {g.label: by_key[g.key] for g in part.groups if not g.main}
    assert labels == {
        "kicad-cli major 8 (main group: 9)": sorted(old_kicad),
        "kicad-cli major absent (run without kicad-cli) (main group: 9)": [no_kicad],
        "schemaVersion 0.9.0 (main group: 1.0.0)": [old_schema],
    }


def test_a_group_differing_in_two_fields_names_both():
    s = Stream()
    s.task("t")
    s.suite("1.0.0")
    for r in (1, 2):
        s.graded_run("t", repeat=r)
    odd = s.graded_run("t", kicad="8.0.1", manifest=h64("older"))
    part, by_key, _ = groups(s)
    [other] = [g for g in part.groups if not g.main]
    assert by_key[other.key] == [odd]
    assert len(other.reasons) == 2
    assert other.reasons[0].startswith("task manifest hash of t") and other.reasons[1] == "kicad-cli major 8 (main group: 9)"


def test_kicad_reference_is_the_major_most_matched_records_carry():
    s = Stream()
    new = s.graded_run("t", kicad="10.0.1")
    old = [s.graded_run("t", repeat=r, kicad="9.0.8") for r in (1, 2)]
    part, by_key, _ = groups(s)
    assert part.reference.kicad_major == "9" and by_key["main"] == sorted(old)
    assert [g.label for g in part.groups if not g.main] == ["kicad-cli major 10 (main group: 9)"]
    assert new not in by_key["main"]


def test_a_regrade_under_a_new_suite_is_grouped_by_the_manifest_it_was_graded_against():
    s = Stream()
    s.task("t")
    s.suite("1.0.0")
    rid = s.graded_run("t")
    s.task("t", manifest=h64("manifest", "t", "v2"))
    s.suite("1.1.0")
    s.grade(rid, "pass", suite="1.1.0", manifest=h64("manifest", "t", "v2"))
    _, by_key, _ = groups(s, "1.1.0")
    assert by_key == {"main": [rid]}
