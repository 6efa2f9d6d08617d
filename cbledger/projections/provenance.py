"""Provenance: the environment a group of records was produced in, the model ids a provider named
in its answers, and what none of the numbers claim.

The standard asks a published comparison to state its reference environment (kicad-cli, Node,
the OS, the copperhead version and commit): a result made elsewhere is still evidence about that
environment, just not comparable to a table built on another one. So each comparability group
lists every environment its records came from, with counts, rather than one value that would hide
a mix. A model id names what was asked for; the provider's answer names what answered, and the
two can differ (a dated snapshot behind an alias, a route that served another model), which is
shown wherever it happens.
"""

from __future__ import annotations

from collections.abc import Iterable

from msgspec import Struct

from cbledger.ledger.events import RunRecorded

COMPAT_PREFIX = "compat:"
NOT_RECORDED = "not recorded"

#: The standard's non-claims (its section 1), as this project states them on every leaderboard.
NON_CLAIMS = (
    "What these numbers measure is how a model behaves inside the copperhead harness on these "
    "tasks: whether it makes the requested change, keeps it electrically verified and within the "
    "recorded budgets, refuses when refusing is right, what that costs, and how narrowly it edits. "
    "They claim nothing beyond that:",
    [
        "**not fabrication readiness**: clean ERC and DRC and documents that agree with the "
        "schematic are a floor the oracle checks, not a judgement that a board can be built;",
        "**not design quality**: whether a part, a topology or a layout is a good choice is outside "
        "every assertion (the optional rubric section is a model's opinion and is labelled so);",
        "**not general model capability**: each result depends on copperhead's prompts, tools and "
        "gates, so a low score can be a finding about the harness as much as about the model;",
        "**not the speed of kicad-cli or copperhead**: wall-clock time is kept as context for cost "
        "only.",
    ],
)


class Environment(Struct, frozen=True, kw_only=True, order=True):
    """One environment records were produced in (None: the run recorded no value)."""

    kicad_cli: str | None
    copperhead: str | None
    copperhead_commit: str | None
    node: str | None
    platform: str
    os: str | None


class EnvironmentRow(Struct, frozen=True, kw_only=True):
    environment: Environment
    records: int


class ProviderEcho(Struct, frozen=True, kw_only=True):
    """Runs of one requested model whose provider named another id in its answers."""

    model: str
    named: list[str]
    runs: int


def environment_of(run: RunRecorded) -> Environment:
    c = run.comparability
    return Environment(
        kicad_cli=c.kicad_cli_version,
        copperhead=c.copperhead_version,
        copperhead_commit=c.copperhead_commit,
        node=c.node_version,
        platform=c.platform,
        os=c.os,
    )


def count_environment(counts: dict[Environment, int], run: RunRecorded) -> None:
    env = environment_of(run)
    counts[env] = counts.get(env, 0) + 1


def environments(runs: Iterable[RunRecorded]) -> list[EnvironmentRow]:
    """Each distinct environment with its record count, most records first (ties: by value)."""
    counts: dict[Environment, int] = {}
    for run in runs:
        count_environment(counts, run)
    return environment_rows(counts)


def environment_rows(counts: dict[Environment, int]) -> list[EnvironmentRow]:
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], _sortable(kv[0])))
    return [EnvironmentRow(environment=env, records=n) for env, n in ordered]


def _sortable(env: Environment) -> tuple[str, ...]:
    return tuple(v or "" for v in (env.kicad_cli, env.copperhead, env.copperhead_commit, env.node, env.platform, env.os))


def wire_model(model_id: str) -> str:
    """The id the provider is asked for: copperhead's `compat:` route sends what follows it."""
    return model_id[len(COMPAT_PREFIX):] if model_id.startswith(COMPAT_PREFIX) else model_id


def named_otherwise(run: RunRecorded) -> list[str]:
    """The ids the provider named that are not the one it was asked for (empty: none differ, or
    the run recorded none)."""
    asked = wire_model(run.model.id)
    return [m for m in run.provider_models if m != asked]


#: requested model -> (the other ids named, in first-seen order; runs that named one)
EchoTally = dict[str, tuple[list[str], int]]


def echo_add(by: EchoTally, run: RunRecorded) -> None:
    other = named_otherwise(run)
    if not other:
        return
    named, n = by.get(run.model.id, ([], 0))
    by[run.model.id] = ([*named, *(m for m in other if m not in named)], n + 1)


def echoes(runs: Iterable[RunRecorded]) -> list[ProviderEcho]:
    """Per requested model, the other ids its providers named and how many runs did so."""
    by: EchoTally = {}
    for run in runs:
        echo_add(by, run)
    return merge_echoes(by, {})


def merge_echoes(first: EchoTally, then: EchoTally) -> list[ProviderEcho]:
    """The echoes of `first`'s runs followed by `then`'s, as if counted in that order."""
    out = []
    for model in sorted(first.keys() | then.keys()):
        named, n = first.get(model, ([], 0))
        more, m = then.get(model, ([], 0))
        out.append(ProviderEcho(model=model, named=[*named, *(x for x in more if x not in named)], runs=n + m))
    return out


NO_REAL_MODEL = (
    "**No real model has been evaluated in this ledger yet.** Every run in it is a harness check "
    "(gold, noop), a scripted model (a session script served by the project's own endpoint), a "
    "replay, or a run the harness or its environment ended: no table below holds a model's result."
)


def real_model_run(run: RunRecorded) -> bool:
    """A run a model answered: recorded as an agent run, and not stopped before its first turn."""
    return run.run_mode == "agent" and run.harness_failure is None
