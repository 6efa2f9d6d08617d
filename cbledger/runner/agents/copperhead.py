"""The real harness: the copperhead CLI, driven exactly as a user would drive it.

`node <cli.js> --repo <sandbox> --json do "<prompt>" --model <id> --max-turns <n>`, never
`--allow-dirty`, stdin closed, in its own process group so that the wall-clock cap can kill the
harness and everything it started. The turn cap is the harness's own (`--max-turns`); only the
wall clock is enforced here. stdout and stderr are kept beside the repository (`.git/`) and
preserved with the run's evidence, but are never graded: the transcript is the contract surface.

The harness's environment is rebuilt from scratch. Of the runner's credentials it gets exactly
the one its route reads: for `compat:<id>` the variable `$COPPERHEAD_API_KEY_ENV` names (and that
name), for the native routes their provider's key, for saved-login routes none. Its git runs
under a fixed project identity with the operator's global and system git configuration shut out,
so no operator's name reaches a preserved run and a commit never depends on the machine.

The CLI is found at `--copperhead-cli`, else `$COPPERHEAD_CLI`, else the project's own install
(`scripts/install-copperhead` puts copperhead 0.9.0 under `.cache/copperhead/`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pygit2

from cbledger.errors import UserError
from cbledger.kicad.oracle import kicad_cli
from cbledger.runner import budget, isolation, scripted_mark
from cbledger.runner import cassette as cassette_mod
from cbledger.runner.agents.base import COPPERHEAD_SIGNATURE as GIT_IDENTITY
from cbledger.runner.agents.base import AgentInput, AgentResult
from cbledger.runner.endpoint import script as script_mod
from cbledger.runner.endpoint.server import SESSION_NOTE, Replay, answered_models, problems
from cbledger.runner.preserve import AGENT_LOG_DIR
from cbledger.runner.recorder import Recorder
from cbledger.tasks.fixtures.hashing import regular_files

CLI_ENV = "COPPERHEAD_CLI"
NODE_ENV = "CBLEDGER_NODE"
#: where scripts/install-copperhead installs the real harness, relative to the project root
INSTALL_DIR = ".cache/copperhead"
INSTALLED_CLI = f"{INSTALL_DIR}/node_modules/copperhead/dist/cli.js"
#: written by scripts/install-copperhead: the version, build commit and archive digest installed
BUILD_FILE = "copperhead-build.json"
BASE_URL_VARIABLE = "COPPERHEAD_BASE_URL"
KEY_ENV_VARIABLE = "COPPERHEAD_API_KEY_ENV"
KICAD_VARIABLE = "COPPERHEAD_KICAD_CLI"
LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1", "[::1]"}


@dataclass(frozen=True)
class CopperheadCli:
    node: str
    script: Path

    def command(self, *args: str) -> list[str]:
        return [self.node, str(self.script), *args]

    @property
    def package_root(self) -> Path | None:
        """The directory of copperhead's own package.json (dist/cli.js sits one level below)."""
        for candidate in (self.script.parent, *self.script.parents):
            manifest = candidate / "package.json"
            if manifest.is_file():
                try:
                    if json.loads(manifest.read_text(encoding="utf-8")).get("name") == "copperhead":
                        return candidate
                except (OSError, ValueError):
                    return None
                return None
        return None

    @property
    def install_root(self) -> Path:
        """What a sandbox binds to run this CLI: the install prefix whose `node_modules/` holds
        copperhead and its dependencies, else the package (a checkout with its own
        `node_modules/`), else the script's directory."""
        root = self.package_root
        if root is None:
            return self.script.parent
        if root.parent.name == "node_modules":
            return root.parent.parent
        return root

    def job(
        self, args: list[str], workdir: Path, env: dict[str, str], wall_clock_sec: float, confinement: isolation.Confinement,
        *, log_dir: Path | None = None, network: isolation.Network = "none", endpoint: tuple[Path, int] | None = None,
    ) -> isolation.Job:
        """One invocation of the CLI as a job the sandbox runs: under bubblewrap the install is
        bound read-only at a path of its own, and node, git and kicad-cli are made visible."""
        binds: tuple[isolation.Bind, ...] = ()
        if confinement.bwrap is None:
            argv = self.command(*args)
        else:
            inside = f"{isolation.COPPERHEAD_MOUNT}/{self.script.relative_to(self.install_root).as_posix()}"
            argv, binds = [self.node, inside, *args], (isolation.Bind(self.install_root, isolation.COPPERHEAD_MOUNT),)
        tools = (self.node, "git", *((kicad,) if (kicad := kicad_cli()) else ()))
        return isolation.Job(argv, workdir, env, wall_clock_sec, log_dir, network, endpoint, binds, tools)

    def version(self) -> str | None:
        """The package's own version; `--version` only when there is no package.json to read."""
        root = self.package_root
        if root is not None:
            try:
                value = json.loads((root / "package.json").read_text(encoding="utf-8")).get("version")
                if isinstance(value, str) and value:
                    return value
            except (OSError, ValueError):
                pass
        try:
            out = subprocess.run(
                self.command("--version"), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                env=basic_environment(),
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        m = re.search(r"\d+\.\d+\.\d+\S*", out.stdout)
        return m.group(0) if m else None

    def commit(self) -> str | None:
        """The commit copperhead was built from: HEAD when the package directory is itself a git
        checkout (never a repository found by walking further up: a CLI installed inside some
        other project would otherwise be stamped with that project's commit), else the commit
        the project's installer recorded beside an install it made while the package's files are
        still the ones it installed (a build patched in place was stamped as the release, and a
        harness developer's regression pooled with it), else unknown."""
        root = self.package_root
        if root is None:
            return None
        if (root / ".git").exists():
            try:
                repo = pygit2.Repository(str(root))
                # a checkout with uncommitted changes is not its HEAD's build (its dist/ is
                # usually ignored, and rebuilt from the changed sources)
                if any(flags != pygit2.enums.FileStatus.IGNORED for flags in repo.status().values()):
                    return None
                return str(repo.head.target)
            except pygit2.GitError:
                return None
        for up in root.parents[:3]:
            build = up / BUILD_FILE
            if build.is_file():
                try:
                    data = json.loads(build.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    return None
                commit = data.get("commit")
                version = data.get("version")
                tree = data.get("tree")
                if (isinstance(commit, str) and re.fullmatch(r"[0-9a-f]{40}", commit) and version == self.version()
                        and isinstance(tree, str) and tree == tree_digest(root)):
                    return commit
                return None
        return None


def tree_digest(package: Path) -> str | None:
    """SHA-256 of `sha256sum`'s lines for every file of the package, in byte order of their
    `./`-relative paths: what scripts/install-copperhead records as `tree`. None when a file
    cannot be read."""
    lines = []
    try:  # the project's one tree walker; a link or a special file in the package: no digest
        for rel in sorted(regular_files(package, symlink="a link", special="not a regular file")):
            lines.append(f"{hashlib.sha256((package / rel).read_bytes()).hexdigest()}  ./{rel}\n")
    except (UserError, OSError):
        return None
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def find_node() -> str | None:
    """`$CBLEDGER_NODE`, else `node` on PATH, else the Node.js wheel's beside this Python."""
    explicit = os.environ.get(NODE_ENV)
    if explicit:
        return explicit
    found = shutil.which("node")
    if found:
        return found
    beside = Path(sys.executable).parent / "node"
    return str(beside) if beside.is_file() else None


def locate(cli: str | Path | None = None, root: Path | None = None) -> CopperheadCli | None:
    """The CLI from the option, else `$COPPERHEAD_CLI`, else the project's install under
    `root`; None when none of them names a file."""
    script = cli or os.environ.get(CLI_ENV)
    if not script:
        if root is None or not (root / INSTALLED_CLI).is_file():
            return None
        script = root / INSTALLED_CLI
    path = Path(script).expanduser().resolve()
    if not path.is_file():
        raise UserError(f"copperhead CLI {path} does not exist (from --copperhead-cli or ${CLI_ENV})")
    node = find_node()
    if node is None:
        raise UserError("node is required to run the copperhead CLI (Node >= 20) but was not found")
    return CopperheadCli(node, path)


def basic_environment() -> dict[str, str]:
    """What any copperhead process gets of the runner's environment (no credentials), plus the
    fixed git identity and the kicad-cli the runner verifies with."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "NODE_OPTIONS", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    name, email = GIT_IDENTITY
    env.update(
        GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email, GIT_COMMITTER_NAME=name, GIT_COMMITTER_EMAIL=email,
        GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0",
    )
    kicad = os.environ.get("CBLEDGER_KICAD_CLI")
    if kicad:
        env[KICAD_VARIABLE] = kicad
    return env


def is_loopback(url: str) -> bool:
    try:
        host = (urlparse(url).hostname or "").lower()
    except ValueError:
        return False
    return host in LOOPBACK_HOSTS


def no_base_url(model_id: str) -> str:
    """The one refusal of a `compat:` model with no endpoint named, shared with `doctor`."""
    return f"model {model_id} is an OpenAI-compatible route: set ${BASE_URL_VARIABLE}"


def key_variables(model_id: str, source: dict[str, str] | None = None) -> dict[str, str]:
    """The credential variables the route of `model_id` reads, and nothing else.

    * `compat:<id>`: `$COPPERHEAD_API_KEY_ENV` and the variable it names. Without it copperhead
      would read `OPENAI_API_KEY` and send it to whatever the compat endpoint is, so a remote
      compat endpoint without `$COPPERHEAD_API_KEY_ENV` is refused; a loopback one needs no key.
    * `codex`, `cursor` (saved logins): none. `claude-code`: its login token when set.
    * `claude*`: `ANTHROPIC_API_KEY`; anything else is copperhead's OpenAI route: `OPENAI_API_KEY`.
      (One key only, so copperhead's failover between the two keyed providers cannot swap the
      model under test for another one mid-run.)
    """
    env = os.environ if source is None else source
    out: dict[str, str] = {}
    if model_id == "compat" or model_id.startswith("compat:"):
        base = env.get(BASE_URL_VARIABLE)
        if not base:
            raise UserError(no_base_url(model_id))
        named = (env.get(KEY_ENV_VARIABLE) or "").strip()
        if named:
            if named not in env:
                raise UserError(f"${KEY_ENV_VARIABLE} names {named}, which is not set")
            out[KEY_ENV_VARIABLE] = named
            out[named] = env[named]
        elif not is_loopback(base):
            raise UserError(
                f"model {model_id} talks to {base}: set ${KEY_ENV_VARIABLE} to the name of the variable holding "
                "that endpoint's key (without it copperhead would send $OPENAI_API_KEY there)"
            )
        return out
    if model_id.split(":", 1)[0] in ("codex", "cursor"):
        return out
    if model_id == "claude-code" or model_id.startswith("claude-code:"):
        names: tuple[str, ...] = ("CLAUDE_CODE_OAUTH_TOKEN",)
    elif model_id.startswith("claude"):
        names = ("ANTHROPIC_API_KEY",)
    else:
        names = ("OPENAI_API_KEY",)
    for name in names:
        if name in env:
            out[name] = env[name]
    return out


def agent_environment(model_id: str, base_url: str | None = None, *, keys: bool = True) -> dict[str, str]:
    """A clean environment: the basics, the route's own key variables (none with `keys` off:
    a loopback endpoint serving a session script needs none), its endpoint."""
    source = dict(os.environ)
    if base_url is not None:
        source[BASE_URL_VARIABLE] = base_url
    env = basic_environment()
    if keys:
        env.update(key_variables(model_id, source))
    if model_id == "compat" or model_id.startswith("compat:"):
        env[BASE_URL_VARIABLE] = source[BASE_URL_VARIABLE]
    return env


def run_capped(
    job: isolation.Job, confinement: isolation.Confinement
) -> tuple[int | None, str | None]:
    """Runs one harness process confined as the suite run says; returns (exit code, why the
    runner killed it: the wall-clock cap or a resource limit, else None)."""
    outcome = isolation.run(job, confinement)
    return outcome.exit_code, outcome.killed


#: native routes the recording proxy can stand in front of: the SDK's base-URL variable, and the
#: provider's own base URL when that variable is not set
NATIVE_UPSTREAMS = {
    "anthropic": ("ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
    "openai": ("OPENAI_BASE_URL", "https://api.openai.com/v1"),
}
#: routes whose provider is another program under the operator's saved login: its traffic never
#: passes a base URL the runner can point elsewhere
SAVED_LOGIN_PREFIXES = ("codex", "cursor", "claude-code")


#: what a native route's key variable holds when its cassette is served back offline: the
#: harness's SDK wants one, and the loopback endpoint reads none (not a credential's shape)
OFFLINE_KEY = "cbledger-offline-no-key"
NATIVE_KEYS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


def native_replay(route: str, endpoint_url: str, env: dict[str, str]) -> str:
    """A native route's run served by the loopback endpoint (a rerun from its cassette): the SDK
    gets a placeholder key, and the base URL its SDK expects (Anthropic's appends `/v1/messages`
    itself, OpenAI's `/chat/completions` to a URL ending in `/v1`)."""
    env[NATIVE_KEYS[route]] = OFFLINE_KEY
    return endpoint_url.removesuffix("/v1") if route == "anthropic" else endpoint_url


def recording_route(model_id: str) -> cassette_mod.Route | None:
    """The route a run of `model_id` is recorded on; None for a saved-login route (not recordable)."""
    head = model_id.split(":", 1)[0]
    if model_id == "compat" or head == "compat":
        return "openai-compat"
    if head in SAVED_LOGIN_PREFIXES:
        return None
    return "anthropic" if model_id.startswith("claude") else "openai"


def not_recordable_note(model_id: str) -> str:
    return (
        f"exchanges not recorded: {model_id} is a saved-login route (its provider's own CLI talks to the provider), "
        "which no base URL points through the recording proxy; this run cannot be re-executed"
    )


#: the task modes the adapter drives; `check` is refused (docs/RUNNER.md section 13)
DRIVEN_MODES = ("do", "sync", "create")
UNDRIVEN_WHY = {
    "check": "check makes no model call, so it measures the harness, not a model: a check-mode task is not run "
    "against a model (its result is captured as evidence for any task that asserts check_clean)",
}


def refuse_undriven(tasks) -> None:
    """Refuses, naming each task and why, a task whose mode the real harness is not driven in."""
    undriven = sorted({(t.id, t.manifest.mode) for t in tasks if t.manifest.mode not in DRIVEN_MODES})
    if undriven:
        modes = sorted({m for _, m in undriven})
        raise UserError(
            f"--agent copperhead drives only `do`, `sync` and `create` tasks; not: {', '.join(t for t, _ in undriven)} ("
            + "; ".join(UNDRIVEN_WHY.get(m, f"mode {m}") for m in modes) + ")"
        )


def command_line(inp: AgentInput) -> list[str]:
    """The CLI's arguments for the task's mode, as a user would type them.

    * `do "<prompt>" --model M --max-turns N`; a later feedback pass is told its hints instead of
      the prompt (`cbledger.runner.passes`).
    * `sync --model M`: copperhead writes its own request (the deterministic verifier's report) and
      takes no prompt and no `--max-turns`; its turn cap is the seeded config's `maxTurns`, which
      the runner sets from the task's cap or the `--max-turns` ablation. A feedback pass has no
      way to reach it, so a sync task is given no later pass.
    * `create --brief <sandbox>/<briefPath> --model M`: the brief is in the fixture tree, so it is
      in the baseline and never in the diff, and copperhead records it repo-relative. Each stage's
      turn cap is the seeded config's `stageMaxTurns[<stage>]`, else its `maxTurns`; like sync it
      takes no hints."""
    manifest = inp.task.manifest
    head = ["--repo", str(inp.sandbox), "--json"]
    if manifest.mode in ("sync", "create"):
        if inp.options.get("message"):
            raise UserError(
                f"task {manifest.id}: copperhead {manifest.mode} takes no prompt, so a feedback pass cannot be told its hints"
            )
        if manifest.mode == "create":
            brief = inp.sandbox / (manifest.request.brief_path or "")
            return [*head, "create", "--brief", str(brief), "--model", inp.model_id]
        return [*head, "sync", "--model", inp.model_id]
    prompt = inp.options.get("message") or manifest.request.prompt or ""
    return [*head, "do", prompt, "--model", inp.model_id, "--max-turns", str(inp.max_turns)]


class CopperheadAgent:
    """The real harness against a model. With `sessions` it is the scripted form: each run's
    task is served its session script by a loopback endpoint (`cbledger.runner.endpoint`), under a
    route of its own, and the harness is pointed there; the model is a script, so the run is
    recorded as `scripted`, never as a model's.

    Every run's model traffic passes the recording proxy (`cbledger.runner.recorder`), whose
    cassette the result carries. With `replay` the sessions are cassettes, served in request order
    and compared with what was recorded (a re-execution, `cbledger rerun`)."""

    def __init__(
        self, cli: CopperheadCli, endpoint=None, sessions: dict | None = None,
        confinement: isolation.Confinement | None = None, replay: tuple[bool, str | None] | None = None,
    ):
        self.cli = cli
        self.endpoint = endpoint
        self.sessions = sessions
        self.kind = "scripted" if sessions is not None else "agent"
        self.confinement = confinement or isolation.Confinement(None)
        #: (strict, the recording run's sandbox path) when the sessions are cassettes
        self.replay = replay
        #: the suite run's money limits (`cbledger.runner.budget`), metered at the proxy
        self.money: budget.Guard | None = None

    def _provenance(self, model_id: str, recorder: Recorder | None, cassette, served: list, notes: list[str]) -> dict:
        """Who answered the run and what limit stopped it: the model ids the provider named, the
        scripted endpoint's mark (a run it answered is scripted whatever the flags), the spend."""
        served_models = answered_models(served) if self.sessions is not None else ()
        # the project's own endpoint marks every answer: a run it answered is scripted, whatever the flags
        scripted = self.sessions is None and recorder is not None and recorder.scripted
        if self.sessions is None and cassette is not None and not scripted:
            served_models = cassette_mod.served_models(cassette)  # what the real provider named
        provider = "openai-compat" if model_id.startswith("compat:") else None
        if self.sessions is not None or scripted:
            provider = "scripted-endpoint"
        if scripted:
            notes.append(scripted_mark.note(model_id))
        meter = recorder.meter if recorder is not None else None
        stopped = meter.stopped() if meter is not None else None
        if meter is not None and stopped is not None:
            notes.insert(0, meter.note())
        if meter is not None and (uncounted := meter.unreported_note()) is not None:
            notes.append(uncounted)
        return {"provider": provider, "provider_models": served_models, "cassette": cassette, "served": tuple(served),
                "scripted": scripted, "cost_cap": stopped}

    def run(self, inp: AgentInput) -> AgentResult:
        manifest = inp.task.manifest
        refuse_undriven([inp.task])
        args = command_line(inp)
        network: isolation.Network = "host"
        endpoint: tuple[Path, int] | None = None
        socket_dir: Path | None = None
        notes: list[str] = []
        served: list = []
        route = recording_route(inp.model_id)
        if self.sessions is not None:
            session = self.sessions.get(manifest.id)
            if session is None:
                raise UserError(f"task {manifest.id}: no session script serves it")
            session = script_mod.for_pass(session, int(inp.options.get("pass", 1)))
            replay = None
            if self.replay is not None:
                strict, recorded_at = self.replay
                replay = Replay(strict, tuple(w for w in (recorded_at, str(inp.sandbox)) if w))
            upstream: str | None = self.endpoint.serve(inp.run_id, session, replay)
            # checked against the session's own address: no key goes to a loopback script
            env = agent_environment(inp.model_id, upstream, keys=False)
            if route in NATIVE_UPSTREAMS and upstream is not None:
                upstream = native_replay(str(route), upstream, env)
        else:
            # the route's key is chosen against the real provider, never against the proxy's
            # loopback address (a remote compat endpoint without its key variable is refused)
            env = agent_environment(inp.model_id)
            upstream = None
            if route == "openai-compat":
                upstream = env[BASE_URL_VARIABLE]
            elif route is not None:
                variable, default = NATIVE_UPSTREAMS[route]
                upstream = os.environ.get(variable) or default
            else:
                notes.append(not_recordable_note(inp.model_id))
        recorder = Recorder(upstream, route, inp.model_id, inp.sandbox) if upstream is not None and route is not None else None
        cassette = None
        try:
            if recorder is not None:
                if self.money is not None and self.sessions is None:
                    recorder.meter = self.money.meter(inp.run_id)
                recorder.__enter__()
                if route == "openai-compat":
                    env[BASE_URL_VARIABLE] = recorder.base_url
                else:
                    env[NATIVE_UPSTREAMS[str(route)][0]] = recorder.base_url
                if self.sessions is not None and self.confinement.bwrap is not None:
                    # no network but the run's own session: a socket into the proxy in front
                    # of it, relayed to the same loopback address inside the sandbox
                    socket_dir = isolation.socket_scratch("endpoint", inp.sandbox, isolation.ENDPOINT_SOCKET_NAME)
                    socket_dir.chmod(0o755)
                    sock = recorder.serve_socket(socket_dir / isolation.ENDPOINT_SOCKET_NAME)
                    network, endpoint = "endpoint", (sock, recorder.port)
            log_dir = inp.sandbox / ".git" / AGENT_LOG_DIR
            job = self.cli.job(
                args, inp.sandbox, env, manifest.caps.wall_clock_sec, self.confinement,
                log_dir=log_dir, network=network, endpoint=endpoint,
            )
            code, killed = run_capped(job, self.confinement)
        finally:
            if recorder is not None:
                recorder.close()
                cassette = recorder.cassette()
            if self.sessions is not None:
                served = self.endpoint.forget(inp.run_id)
                notes.extend(f"{SESSION_NOTE}{p}" for p in problems(served) if self.replay is None)
            if socket_dir is not None:
                shutil.rmtree(socket_dir, ignore_errors=True)
        common = self._provenance(inp.model_id, recorder, cassette, served, notes)
        if killed:
            notes.insert(0, f"killed at {killed}")
            return AgentResult(runner_exit="cap-exceeded", note="; ".join(notes), exit_code=None, **common)
        if code != 0:
            notes.insert(0, f"copperhead exited {code}")
        return AgentResult(note="; ".join(notes) or None, exit_code=code, **common)
