"""End-state KiCad checks, each passing and failing with a detail that states what was observed:
nets, symbols, pins and doc drift from the parsed end-state schematic; ERC/DRC and `copperhead
check` from the reports captured when the run ended (real kicad-cli reports where it matters:
the demo board's, and the real microphone board's)."""

from __future__ import annotations

import json

import pytest

from tests.test_grading_kit import (
    SCHEMATIC,
    assertion,
    check,
    demo_schematic,
    drc_report,
    erc_report,
    make_box,
    one_assertion_box,
    real_fixture,
    violation,
    write_fixture,
    write_task,
)

# --------------------------------------------------------------------------- nets


def test_net_present_passes_for_a_root_label_by_its_bare_name(tmp_path):
    box = one_assertion_box(tmp_path, "net_present", {"net": "SIG"})
    assert check(box) == ("pass", "net SIG is present (/SIG, 2 pin(s))")


def test_net_present_matches_the_full_kicad_name_and_global_power_nets(tmp_path):
    box = one_assertion_box(tmp_path, "net_present", {"net": "/SIG"})
    assert check(box)[0] == "pass"
    box2 = one_assertion_box(tmp_path / "b", "net_present", {"net": "VCC"})
    assert check(box2) == ("pass", "net VCC is present (VCC, 1 pin(s))")


def test_net_present_fails_after_a_rename(tmp_path):
    box = one_assertion_box(tmp_path, "net_present", {"net": "SIG"})
    box.write(SCHEMATIC, demo_schematic(sig="SENSE"))
    assert check(box) == ("fail", "net SIG not found among 3 net(s)")


def test_net_absent_passes_after_a_rename_and_fails_before(tmp_path):
    box = one_assertion_box(tmp_path, "net_absent", {"net": "SIG"})
    assert check(box) == ("fail", "net SIG is still present (/SIG)")
    box.write(SCHEMATIC, demo_schematic(sig="SENSE"))
    assert check(box) == ("pass", "net SIG is absent")


def test_net_checks_read_the_end_state_not_the_commit(tmp_path):
    """An uncommitted edit is part of the end state (the snapshot holds the working tree)."""
    box = one_assertion_box(tmp_path, "net_present", {"net": "SENSE"})
    box.write(SCHEMATIC, demo_schematic(sig="SENSE"))
    assert check(box)[0] == "pass"


def test_a_missing_schematic_fails_as_unevaluable(tmp_path):
    box = one_assertion_box(tmp_path, "net_present", {"net": "SIG"})
    box.delete(SCHEMATIC)
    status, detail = check(box)
    assert status == "fail"
    assert detail == f"could not be evaluated: the schematic {SCHEMATIC} does not exist in the end state"


# --------------------------------------------------------------------------- symbols and pins


def test_symbol_present_with_value_and_footprint(tmp_path):
    box = one_assertion_box(
        tmp_path, "symbol_present", {"refdes": "R2", "value": "10k", "footprint": "Resistor_SMD:R_0603_1608Metric"}
    )
    assert check(box) == ("pass", "R2 present (value '10k', footprint 'Resistor_SMD:R_0603_1608Metric')")


def test_symbol_present_fails_on_a_wrong_value_and_on_absence(tmp_path):
    box = one_assertion_box(tmp_path, "symbol_present", {"refdes": "R2", "value": "22k"})
    assert check(box) == ("fail", "R2: value is '10k', expected '22k'")
    box2 = one_assertion_box(tmp_path / "b", "symbol_present", {"refdes": "R3"})
    assert check(box2) == ("fail", "no symbol R3")
    box2.write(SCHEMATIC, demo_schematic(add_r3=True))
    assert check(box2)[0] == "pass"


def test_symbol_present_value_change_passes(tmp_path):
    box = one_assertion_box(tmp_path, "symbol_present", {"refdes": "R2", "value": "22k"})
    box.write(SCHEMATIC, demo_schematic(r2_value="22k"))
    assert check(box)[0] == "pass"


def test_symbol_absent(tmp_path):
    box = one_assertion_box(tmp_path, "symbol_absent", {"refdes": "R3"})
    assert check(box) == ("pass", "no symbol R3")
    box.write(SCHEMATIC, demo_schematic(add_r3=True))
    assert check(box) == ("fail", "R3 exists (value '4k7', Device:R)")


def test_pin_net_equals(tmp_path):
    box = one_assertion_box(tmp_path, "pin_net_equals", {"refdes": "R1", "pin": 2, "net": "SIG"})
    assert check(box) == ("pass", "R1.2 is on /SIG")
    box.write(SCHEMATIC, demo_schematic(sig="SENSE"))
    assert check(box) == ("fail", "R1.2 is on /SENSE, not SIG")


def test_pin_net_equals_fails_for_a_missing_symbol(tmp_path):
    box = one_assertion_box(tmp_path, "pin_net_equals", {"refdes": "R9", "pin": "1", "net": "SIG"})
    assert check(box) == ("fail", "no symbol R9 with connected pins")


def test_pin_net_equals_fails_for_a_pin_on_no_net(tmp_path):
    box = one_assertion_box(tmp_path, "pin_net_equals", {"refdes": "R1", "pin": "7", "net": "SIG"})
    assert check(box) == ("fail", "R1.7 is on no net")


# --------------------------------------------------------------------------- drift


def test_drift_clean_passes_when_docs_agree(tmp_path):
    box = one_assertion_box(tmp_path, "drift_clean")
    assert check(box) == ("pass", "docs/BOM.md and docs/PINOUT.md agree with the schematic")


def test_drift_clean_fails_when_the_schematic_moves_and_the_bom_does_not(tmp_path):
    box = one_assertion_box(tmp_path, "drift_clean")
    box.write(SCHEMATIC, demo_schematic(r2_value="22k"))
    assert check(box) == (
        "fail",
        "1 doc-drift mismatch(es): BOM.md line 6: R2 value is '10k' in the doc but '22k' in the schematic",
    )


def test_drift_clean_fails_on_a_renamed_net_the_pinout_still_names(tmp_path):
    box = one_assertion_box(tmp_path, "drift_clean")
    box.write(SCHEMATIC, demo_schematic(sig="SENSE"))
    status, detail = check(box)
    assert status == "fail" and "PINOUT.md" in detail and "SIG" in detail


# --------------------------------------------------------------------------- reports (synthetic shapes)


def test_erc_clean_without_a_captured_report_is_unevaluable(tmp_path):
    box = one_assertion_box(tmp_path, "erc_clean")
    assert check(box) == ("fail", "could not be evaluated: no ERC report was captured when this run ended")


def test_erc_clean_ignores_excluded_violations(tmp_path):
    box = one_assertion_box(tmp_path, "erc_clean")
    box.reports(erc=erc_report(violation("pin_not_connected", excluded=True)))
    assert check(box)[0] == "pass"


def test_drc_no_new_violations_counts_unconnected_items_and_parity(tmp_path):
    box = one_assertion_box(tmp_path, "drc_no_new_violations", {"severity": "error"})
    box.reports(drc=drc_report(unconnected=[violation("unconnected_items")]))
    assert check(box) == (
        "fail",
        "new DRC violations at error and above: unconnected:unconnected_items 0→1",
    )


def test_no_new_violations_allows_what_the_baseline_already_had(tmp_path):
    base_erc = erc_report(violation("pin_not_driven"), violation("pin_not_driven"))
    fixture = write_fixture(tmp_path / "project", erc=base_erc)
    box = one_assertion_box(tmp_path, "erc_no_new_violations", fixture=fixture)
    box.reports(erc=erc_report(violation("pin_not_driven"), violation("pin_not_driven")))
    assert check(box) == ("pass", "no ERC violation at error and above beyond the fixture baseline")
    box.reports(erc=erc_report(*[violation("pin_not_driven")] * 3))
    assert check(box) == ("fail", "new ERC violations at error and above: erc:pin_not_driven 2→3")


def test_no_new_violations_at_error_ignores_new_warnings_but_warning_severity_does_not(tmp_path):
    fixture = write_fixture(tmp_path / "project")
    t = write_task(
        tmp_path / "project",
        "sev",
        fixture,
        [
            assertion("err", "erc_no_new_violations", {}),
            assertion("warn", "erc_no_new_violations", {"severity": "warning"}),
        ],
    )
    box = make_box(tmp_path, t, fixture)
    box.reports(erc=erc_report(violation("endpoint_off_grid", "warning")))
    assert box.outcome("err").status == "pass"
    warn = box.outcome("warn")
    assert (warn.status, warn.detail) == ("fail", "new ERC violations at warning and above: erc:endpoint_off_grid 0→1")


def test_no_new_violations_without_a_fixture_baseline_is_unevaluable(tmp_path):
    fixture = write_fixture(tmp_path / "project")
    (fixture.dir / "baseline" / "drc.json").unlink()
    box = one_assertion_box(tmp_path, "drc_no_new_violations", fixture=fixture)
    box.reports(drc=drc_report())
    assert check(box) == (
        "fail",
        "could not be evaluated: fixture demo-board has no baseline DRC report to compare with",
    )


# --------------------------------------------------------------------------- reports from kicad-cli


@pytest.mark.kicad
def test_erc_clean_and_no_new_violations_on_a_real_kicad_cli_report(tmp_path, kicad_cli):
    """Removing the PWR_FLAGs makes kicad-cli report undriven power pins: a new ERC error."""
    fixture = write_fixture(tmp_path / "project")
    t = write_task(
        tmp_path / "project",
        "erc",
        fixture,
        [assertion("clean", "erc_clean"), assertion("no-new", "erc_no_new_violations")],
    )
    box = make_box(tmp_path, t, fixture)
    box.verify()
    assert box.grade().verdict == "pass"
    box.write(SCHEMATIC, demo_schematic(pwr_flags=False))
    box.verify()
    clean, no_new = box.outcome("clean"), box.outcome("no-new")
    assert (clean.status, clean.detail) == ("fail", "ERC report has 2 violation(s): erc:power_pin_not_driven×2")
    assert (no_new.status, no_new.detail) == (
        "fail",
        "new ERC violations at error and above: erc:power_pin_not_driven 0→2",
    )


@pytest.mark.kicad
def test_drc_clean_on_a_real_kicad_cli_report(tmp_path, kicad_cli):
    box = one_assertion_box(tmp_path, "drc_clean")
    box.write(SCHEMATIC, demo_schematic(add_r3=True))  # the project ignores missing footprints
    box.verify()
    assert check(box) == ("pass", "DRC report has no violations")


@pytest.mark.kicad
@pytest.mark.shared
def test_the_microphone_board_net_rename_graded_from_real_reports(tmp_path, kicad_cli, shared_real, repo_root):
    """The reference rename (DATA → PDM_DATA) on the real board: nets move, ERC gains nothing,
    DRC gains three schematic-parity warnings (the board still says /DATA) but no error."""
    root = tmp_path / "project"
    fixture = real_fixture(root, shared_real, repo_root, "antmicro-microphone-board")
    t = write_task(
        root,
        "mic-rename",
        fixture,
        [
            assertion("new", "net_present", {"net": "PDM_DATA"}),
            assertion("old", "net_absent", {"net": "DATA"}),
            assertion("pin", "pin_net_equals", {"refdes": "R1", "pin": "2", "net": "PDM_DATA"}),
            assertion("sibling", "net_present", {"net": "CLK"}),
            assertion("mic", "symbol_present", {"refdes": "MK1", "value": "MK_SPH0644LM4H-1"}),
            assertion("erc", "erc_no_new_violations"),
            assertion("drc", "drc_no_new_violations"),
            assertion("drc-warn", "drc_no_new_violations", {"severity": "warning"}, required=False),
            assertion("erc-strict", "erc_clean", required=False),
            assertion("drc-strict", "drc_clean", required=False),
        ],
        request={"prompt": "rename net DATA to PDM_DATA"},
    )
    box = make_box(tmp_path, t, fixture)
    sch = "hardware/microphone-board.kicad_sch"
    text = box.read(sch)
    assert text.count('(label "DATA"') == 2
    box.write(sch, text.replace('(label "DATA"', '(label "PDM_DATA"'))
    box.verify()
    g = box.grade()
    by_id = {o.id: o for o in g.outcomes}
    assert by_id["new"].detail == "net PDM_DATA is present (/PDM_DATA, 3 pin(s))"
    assert by_id["old"].status == "pass"
    assert by_id["pin"].detail == "R1.2 is on /PDM_DATA"
    assert by_id["sibling"].status == "pass" and by_id["mic"].status == "pass"
    assert by_id["erc"].status == "pass" and by_id["drc"].status == "pass"
    assert (by_id["drc-warn"].status, by_id["drc-warn"].detail) == (
        "fail",
        "new DRC violations at warning and above: schematic_parity:net_conflict 0→3",
    )
    assert by_id["erc-strict"].detail == (
        "ERC report has 44 violation(s): erc:footprint_link_issues×12, erc:lib_symbol_issues×32"
    )
    assert by_id["drc-strict"].status == "fail" and "schematic_parity:net_conflict×3" in by_id["drc-strict"].detail
    assert g.verdict == "pass" and g.partial_credit == round(7 / 10, 4)


# --------------------------------------------------------------------------- check_clean


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"command": "copperhead check", "exitCode": 0}, ("pass", "`copperhead check` exited 0")),
        ({"command": "copperhead check", "exitCode": 1, "output": "drift"}, ("fail", "`copperhead check` exited 1")),
        ({"command": "copperhead check"}, ("fail", "could not be evaluated: the captured check result has no integer exitCode")),
    ],
)
def test_check_clean(tmp_path, result, expected):
    box = one_assertion_box(tmp_path, "check_clean")
    box.reports(check=json.dumps(result).encode())
    assert check(box) == expected


def test_check_clean_without_a_captured_result(tmp_path):
    box = one_assertion_box(tmp_path, "check_clean")
    assert check(box) == ("fail", "could not be evaluated: no `copperhead check` result was captured when this run ended")


def test_check_clean_with_a_result_that_is_not_json(tmp_path):
    box = one_assertion_box(tmp_path, "check_clean")
    box.reports(check=b"exit 0\n")
    status, detail = check(box)
    assert status == "fail" and detail.startswith("could not be evaluated: the captured check result is not JSON")
