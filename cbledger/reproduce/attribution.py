"""A run's attribution, decided again from what it preserved.

Whether a run is the model's or its environment's (`run.recorded.harnessFailure`) takes it out of
every model row, gate and cost per passing task. A hand-edited attribution, re-chained with the
rest, would move a published number while every digest still matched; so the runner's own rule
(`runner.harness_failure.detect`) is applied again to the restored transcript and harness stderr,
the run's stored cassette, and the exit status its event states, and any difference is a finding
(`attribution-mismatch`).
"""

from __future__ import annotations

import msgspec
import pygit2
from blake3 import blake3
from msgspec import UnsetType

from cbledger import credentials
from cbledger.errors import UserError
from cbledger.grading.evidence.transcript import Transcript, parse_transcript
from cbledger.grading.evidence.tree import view
from cbledger.ledger.events import HarnessFailure, RunRecorded
from cbledger.reproduce.findings import Finding
from cbledger.reproduce.restore import evidence_commits
from cbledger.runner import cassette as cassette_mod
from cbledger.runner.execute import HARNESS_RUN_MODES
from cbledger.runner.harness_failure import detect, exit_code_from, unpreserved_reason
from cbledger.workspace import Workspace


def attribution_findings(
    repo: pygit2.Repository, run: RunRecorded, seq: int, complete: bool, cassette: cassette_mod.Cassette | None,
) -> list[Finding]:
    """One finding when the preserved evidence gives another attribution than the recorded one.
    `cassette`: the run's own, intact (`stored_cassette`). Evidence that is missing or altered
    gives none here: the digest checks already fail it."""
    if run.run_mode not in HARNESS_RUN_MODES:
        return []
    capture, evidence = evidence_commits(repo, run, complete)
    if capture is None or evidence is None:
        return []
    transcript = Transcript(path=None)
    ref = run.evidence.get("transcript")
    if ref is not None:
        data = _intact(view(repo, capture).read(ref.path), ref.blake3, ref.bytes)
        if data is None:
            return []
        transcript = parse_transcript(data, ref.path)
    logs: dict[str, str] = {}
    # stdout is read only for a run with no transcript (sync's report), where detect reads it
    for name in ("harness-stderr",) + (("harness-stdout",) if transcript.path is None else ()):
        log = run.evidence.get(name)
        read = b"" if log is None else _intact(view(repo, evidence).read(log.path), log.blake3, log.bytes)
        if read is None:
            return []
        logs[name] = read.decode("utf-8", "replace")
    said, stdout = logs["harness-stderr"], logs.get("harness-stdout", "")
    exit_code, killed = exit_code_from(run.runner_note), run.runner_exit == "cap-exceeded"
    unpreserved = unpreserved_reason(run.runner_note)
    again = _redacted(detect(transcript, said, exit_code, killed, cassette, run.timings.agent_ms, unpreserved=unpreserved,
                             stdout=stdout))
    if again == run.harness_failure:
        return []
    # recorded under an earlier rule, what it gives stands: before a provider's 402 was the
    # account's; before a run whose end state was not kept was read without its transcript;
    # before copperhead's session-limit exit was the provider's; before sync's report was read;
    # before the harness's own uncaught exception was its
    for earlier in ({"before_402": True}, {"unpreserved": None}, {"session_limit": False}, {"stdout": ""}, {"crash": False},
                    {"unpreserved": None, "crash": False}):
        if _redacted(detect(transcript, said, exit_code, killed, cassette, run.timings.agent_ms, **earlier)) == run.harness_failure:
            return []
    recorded, derived = msgspec.to_builtins(run.harness_failure), msgspec.to_builtins(again)
    return [Finding(
        check="run", kind="attribution-mismatch", seq=seq, run_id=run.run_id, field="harnessFailure",
        message=f"harnessFailure is {recorded!r}, but the preserved evidence gives {derived!r}",
        expected=recorded, actual=derived,
    )]


def _redacted(found: HarnessFailure | None) -> HarnessFailure | None:
    return None if found is None else msgspec.structs.replace(found, detail=credentials.redact(found.detail))


def stored_cassette(workspace: Workspace, run: RunRecorded) -> tuple[bool, cassette_mod.Cassette | None]:
    """(intact, the run's own cassette or None when it recorded none). A cassette that is
    missing or altered is not intact: `cassette_findings` names it, and nothing is derived from it."""
    if isinstance(run.cassette, UnsetType):
        return True, None
    path = workspace.stored(run.cassette.path)
    if path is None:
        return False, None
    try:
        return True, cassette_mod.load(path, run.cassette.blake3)
    except UserError:
        return False, None


def _intact(data: bytes | None, digest: str, size: int) -> bytes | None:
    if data is None or len(data) != size or blake3(data).hexdigest() != digest:
        return None
    return data
