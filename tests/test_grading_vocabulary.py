"""The closed vocabulary: the check registry covers exactly the 23 types of the standard, each
with its argument schema and evidence source, and the vocabulary hash moves only on purpose."""

from __future__ import annotations

import msgspec
import pytest

from cbledger.grading.registry import all_checks
from cbledger.tasks.model import Assertions
from cbledger.tasks.vocabulary import SPEC_CLASSES, VOCABULARY, VOCABULARY_HASH

STANDARD = {
    "end-state": {
        "erc_no_new_violations",
        "drc_no_new_violations",
        "erc_clean",
        "drc_clean",
        "check_clean",
        "drift_clean",
        "net_present",
        "net_absent",
        "symbol_present",
        "symbol_absent",
        "pin_net_equals",
        "doc_row_matches",
        "doc_contains",
        "constraint_registered",
    },
    "diff": {
        "files_touched_subset",
        "file_unchanged",
        "diff_ratio_max",
        "commit_count",
        "rollback_byte_identical",
        "no_secret",
    },
    "transcript": {"exit_path_in", "refusal_cites_budget", "transcript_event"},
}


def test_the_registry_covers_exactly_the_23_types():
    names = set().union(*STANDARD.values())
    assert len(names) == 23
    assert set(all_checks()) == names
    assert set(VOCABULARY) == names
    assert set(SPEC_CLASSES) == names


def test_each_type_reads_its_evidence_source():
    for source, names in STANDARD.items():
        for name in names:
            assert VOCABULARY[name][1] == source, name


def test_the_vocabulary_hash_is_pinned():
    """Changing a type's arguments or source changes what a grade means: bump the suite version
    and update this value together."""
    assert VOCABULARY_HASH == PINNED_HASH


PINNED_HASH = "2602cc60f2476787d90b7b714b91213e0833b6c9d0a32b06269345e5120d22af"


@pytest.mark.parametrize(
    ("item", "error"),
    [
        ({"id": "a", "type": "net_present", "args": {}, "weight": 1, "required": True}, "missing required field `net`"),
        ({"id": "a", "type": "net_present", "args": {"net": "X", "extra": 1}, "weight": 1, "required": True}, "unknown field `extra`"),
        ({"id": "a", "type": "commit_count", "args": {"equals": 1, "max": 2}, "weight": 1, "required": True}, "exactly one of"),
        ({"id": "a", "type": "doc_contains", "args": {"doc": "A.md", "pattern": "("}, "weight": 1, "required": True}, "not a valid regular expression"),
        ({"id": "a", "type": "exit_path_in", "args": {"paths": ["finished"]}, "weight": 1, "required": True}, "Invalid enum value 'finished'"),
        ({"id": "a", "type": "diff_ratio_max", "args": {"path": "x", "ratio": 2}, "weight": 1, "required": True}, "Expected `float` <= 1.0"),
        ({"id": "a", "type": "no_secret", "args": {}, "weight": 0, "required": True}, "Expected `float` > 0.0"),
    ],
)
def test_argument_schemas_are_enforced_by_decoding(item, error):
    with pytest.raises(msgspec.ValidationError, match=error.replace("(", r"\(").replace("`", "`")):
        msgspec.convert([item], Assertions)


def test_argument_defaults():
    decoded = msgspec.convert(
        [
            {"id": "a", "type": "erc_no_new_violations", "weight": 1, "required": True},
            {"id": "b", "type": "transcript_event", "args": {"event": "run-end"}, "weight": 1, "required": True},
        ],
        Assertions,
    )
    assert decoded[0].args.severity == "error"
    assert (decoded[1].args.min_count, decoded[1].args.matches) == (1, {})
