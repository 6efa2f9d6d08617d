"""The record path rule, in one place so the fold, the writer and the read model cannot disagree.

`results/<date>/<model-dir>/<task-id>/run-<n>.json`, where

* `date` is the UTC date of the run's `timings.startedAt` (never the grading or writing time, so a
  re-grade next month lands beside the run it grades);
* `model-dir` is the model id with `:` replaced by `-` (`harness:gold` -> `harness-gold`), as the
  reference implementation lays out its results; model ids are validated as safe path segments
  by the ledger, so no other escaping is needed;
* `n` is the run's ordinal among the runs of the same (date, model, task) in ledger order, fixed
  when `run.recorded` is folded. Retracted and ungraded runs keep their ordinal, so removing or
  adding a record never renames another one;
* a grade under a suite version other than the run's first graded one gets
  `run-<n>.suite-<version>.json` beside it;
* a retracted run's records stay as they were published, and `run-<n>.retracted.json` beside
  them says that the run was retracted, when and why (a record is never edited after it is
  written, so the mark is a file of its own).
"""

from __future__ import annotations

import datetime as _dt
import re

# `\Z`, not `$`: a name with a trailing newline is not a record (`$` would match before it).
RECORD_NAME = re.compile(r"^run-(?P<n>[1-9][0-9]*)(?:\.suite-(?P<suite>\d+\.\d+\.\d+))?\.json\Z")
RETRACTION_NAME = re.compile(r"^run-(?P<n>[1-9][0-9]*)\.retracted\.json\Z")
DATE_DIR = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")


def model_dir(model_id: str) -> str:
    return model_id.replace(":", "-")


def run_date(started_at: _dt.datetime) -> str:
    return started_at.astimezone(_dt.UTC).date().isoformat()


def run_dir(date: str, model_id: str, task_id: str) -> str:
    """The directory of a run's records, relative to `results/`."""
    return f"{date}/{model_dir(model_id)}/{task_id}"


def record_name(ordinal: int, suite_version: str | None = None) -> str:
    """`suite_version` is given only for grades after the run's first graded suite version."""
    if suite_version is None:
        return f"run-{ordinal}.json"
    return f"run-{ordinal}.suite-{suite_version}.json"


def retraction_name(ordinal: int) -> str:
    """The mark beside a retracted run's records."""
    return f"run-{ordinal}.retracted.json"


def is_retraction_path(relpath: str) -> bool:
    """True for `<date>/<model-dir>/<task>/run-<n>.retracted.json` relative to `results/`."""
    parts = relpath.split("/")
    return len(parts) == 4 and bool(DATE_DIR.match(parts[0])) and bool(RETRACTION_NAME.match(parts[3]))


def is_record_path(relpath: str) -> bool:
    """True for `<date>/<model-dir>/<task>/run-<n>[.suite-<v>].json` relative to `results/`."""
    parts = relpath.split("/")
    return len(parts) == 4 and bool(DATE_DIR.match(parts[0])) and bool(RECORD_NAME.match(parts[3]))
