"""End-state checks that need KiCad knowledge: nets, symbols, pins, doc drift, and the
verification reports kicad-cli wrote when the run ended.

The schematic is read from the end-state tree (never from a checkout the run could have left
in any state) and parsed once per grade. Net names follow `netlist.name_matches`: a bare name
such as `DATA` matches KiCad's root-local `/DATA` and a global `DATA`; a name containing `/` must
match KiCad's full name exactly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import NamedTuple

from cbledger.grading.context import GradeContext, Unevaluable
from cbledger.grading.registry import check
from cbledger.kicad import compute_nets
from cbledger.kicad.drift import doc_drift_texts
from cbledger.kicad.hierarchy import load_schematic_tree
from cbledger.kicad.model import Schematic
from cbledger.kicad.netlist import Net, Netlist
from cbledger.kicad.reports import Report, Severity, introduced_violations, is_clean, parse_report
from cbledger.kicad.sexpr import DigestCache
from cbledger.kicad.symbols import find_symbol
from cbledger.tasks import vocabulary as v

SCHEMATIC_SUFFIX = ".kicad_sch"


def _root_schematic(ctx: GradeContext) -> str:
    return ctx.fixture.manifest.artifacts.schematic


def _visible(path: str) -> bool:
    """The end-state files the KiCad reader may see: schematics, and the docs drift reads."""
    return path.endswith(SCHEMATIC_SUFFIX) or (path.startswith("docs/") and path.endswith(".md"))


class _EndState(NamedTuple):
    schematic: Schematic
    nets: Netlist
    drift: list[str]


#: end states already graded in this process, by the digest of every file they were read from
#: (another run's identical end state, a re-grade, `replay --verify` over many runs)
END_STATE_CACHE = DigestCache(capacity=16)


def _doc(read: Callable[[str], bytes | None], path: str) -> str | None:
    data = read(path)
    if data is None:
        return None
    # as a file opened in text mode reads it: any line ending is a newline
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def _loaded(ctx: GradeContext) -> _EndState:
    """The end state's schematic, nets and doc drift, computed once per grade and read straight
    from the end-state tree (nothing is written to disk to read it)."""
    cached = ctx.cache.get("kicad")
    if isinstance(cached, _EndState):
        return cached
    root = _root_schematic(ctx)
    end = ctx.evidence.end
    if not end.exists(root):
        raise Unevaluable(f"the schematic {root} does not exist in the end state")
    visible = sorted(path for path in end.files() if _visible(path))
    contents = {path: end.read(path) or b"" for path in visible}

    def read(path: str) -> bytes | None:
        return contents.get(path)

    def build() -> _EndState:
        schematic = load_schematic_tree(read, root)
        nets = compute_nets(schematic)
        drift = doc_drift_texts(schematic, _doc(read, "docs/BOM.md"), _doc(read, "docs/PINOUT.md"), nets)
        return _EndState(schematic, nets, drift)

    parts = [root.encode()]
    for path, data in contents.items():
        parts += [path.encode(), data]
    state = END_STATE_CACHE.get_or_build_parts("end-state", parts, build)
    ctx.cache["kicad"] = state
    return state


def _names(nets: Iterable[Net]) -> str:
    return ", ".join(sorted({n.name for n in nets}))


@check("net_present")
def net_present(args: v.NetArgs, ctx: GradeContext) -> tuple[bool, str]:
    nets = _loaded(ctx).nets
    found = nets.nets_by_name(args.net)
    if found:
        return True, f"net {args.net} is present ({_names(found)}, {sum(len(n.nodes) for n in found)} pin(s))"
    return False, f"net {args.net} not found among {len(nets.nets)} net(s)"


@check("net_absent")
def net_absent(args: v.NetArgs, ctx: GradeContext) -> tuple[bool, str]:
    nets = _loaded(ctx).nets
    found = nets.nets_by_name(args.net)
    if found:
        return False, f"net {args.net} is still present ({_names(found)})"
    return True, f"net {args.net} is absent"


@check("symbol_present")
def symbol_present(args: v.SymbolPresentArgs, ctx: GradeContext) -> tuple[bool, str]:
    sym = find_symbol(_loaded(ctx).schematic, args.refdes)
    if sym is None:
        return False, f"no symbol {args.refdes}"
    problems = []
    if args.value is not None and sym.value != args.value:
        problems.append(f"value is {sym.value!r}, expected {args.value!r}")
    if args.footprint is not None and sym.footprint != args.footprint:
        problems.append(f"footprint is {sym.footprint!r}, expected {args.footprint!r}")
    if problems:
        return False, f"{args.refdes}: " + "; ".join(problems)
    return True, f"{args.refdes} present (value {sym.value!r}, footprint {sym.footprint!r})"


@check("symbol_absent")
def symbol_absent(args: v.SymbolAbsentArgs, ctx: GradeContext) -> tuple[bool, str]:
    sym = find_symbol(_loaded(ctx).schematic, args.refdes)
    if sym is not None:
        return False, f"{args.refdes} exists (value {sym.value!r}, {sym.lib_id})"
    return True, f"no symbol {args.refdes}"


@check("pin_net_equals")
def pin_net_equals(args: v.PinNetArgs, ctx: GradeContext) -> tuple[bool, str]:
    nets = _loaded(ctx).nets
    pin = str(args.pin)
    if not nets.has_reference(args.refdes):
        return False, f"no symbol {args.refdes} with connected pins"
    net = nets.pin_net(args.refdes, pin)
    if net is None:
        return False, f"{args.refdes}.{pin} is on no net"
    ok = net in nets.nets_by_name(args.net)
    return ok, f"{args.refdes}.{pin} is on {net.name}" + ("" if ok else f", not {args.net}")


@check("drift_clean")
def drift_clean(args: v.NoArgs, ctx: GradeContext) -> tuple[bool, str]:
    drift = _loaded(ctx).drift
    if drift:
        shown = "; ".join(drift[:5]) + (f"; and {len(drift) - 5} more" if len(drift) > 5 else "")
        return False, f"{len(drift)} doc-drift mismatch(es): {shown}"
    return True, "docs/BOM.md and docs/PINOUT.md agree with the schematic"


def _report(ctx: GradeContext, kind: str) -> Report:
    return parse_report(json.loads(ctx.report(kind)), f"{kind}.json")


def _clean(ctx: GradeContext, kind: str) -> tuple[bool, str]:
    report = _report(ctx, kind)
    if is_clean(report):
        return True, f"{kind.upper()} report has no violations"
    counts: dict[str, int] = {}
    for viol in report.violations:
        key = f"{viol.source}:{viol.type}"
        counts[key] = counts.get(key, 0) + 1
    listed = ", ".join(f"{k}×{n}" for k, n in sorted(counts.items()))
    return False, f"{kind.upper()} report has {len(report.violations)} violation(s): {listed}"


def _no_new(ctx: GradeContext, kind: str, severity: Severity) -> tuple[bool, str]:
    end = _report(ctx, kind)
    base = parse_report(json.loads(ctx.baseline_report(kind)), f"baseline/{kind}.json")
    introduced = introduced_violations(base, end, severity)
    if introduced:
        listed = ", ".join(f"{i.source}:{i.type} {i.baseline}→{i.end}" for i in introduced)
        return False, f"new {kind.upper()} violations at {severity} and above: {listed}"
    return True, f"no {kind.upper()} violation at {severity} and above beyond the fixture baseline"


@check("erc_clean")
def erc_clean(args: v.NoArgs, ctx: GradeContext) -> tuple[bool, str]:
    return _clean(ctx, "erc")


@check("drc_clean")
def drc_clean(args: v.NoArgs, ctx: GradeContext) -> tuple[bool, str]:
    return _clean(ctx, "drc")


@check("erc_no_new_violations")
def erc_no_new_violations(args: v.SeverityArgs, ctx: GradeContext) -> tuple[bool, str]:
    return _no_new(ctx, "erc", args.severity)


@check("drc_no_new_violations")
def drc_no_new_violations(args: v.SeverityArgs, ctx: GradeContext) -> tuple[bool, str]:
    return _no_new(ctx, "drc", args.severity)


@check("check_clean")
def check_clean(args: v.NoArgs, ctx: GradeContext) -> tuple[bool, str]:
    """Reads the captured `copperhead check` result: `{"command", "exitCode", "output"?}`; a
    null `exitCode` comes with the runner's `skipped` or `killed` reason."""
    try:
        result = json.loads(ctx.report("check"))
    except Unevaluable:
        raise Unevaluable("no `copperhead check` result was captured when this run ended") from None
    except ValueError as exc:
        raise Unevaluable(f"the captured check result is not JSON: {exc}") from None
    code = result.get("exitCode") if isinstance(result, dict) else None
    if not isinstance(code, int):
        # the runner writes why the check did not run to an end (`cbledger.runner.check_capture`)
        why = next((result[k] for k in ("skipped", "killed") if isinstance(result, dict) and isinstance(result.get(k), str)), None)
        raise Unevaluable("the captured check result has no integer exitCode" + (f" ({why})" if why else ""))
    return code == 0, f"`copperhead check` exited {code}"
