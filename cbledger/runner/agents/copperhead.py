"""The real harness: the copperhead CLI, driven exactly as a user would drive it.

`node <cli.js> --repo <sandbox> --json do "<prompt>" --model <id> --max-turns <n>`, never
`--allow-dirty`, stdin closed, in its own process group so that the wall-clock cap can kill the
harness and everything it started. The turn cap is the harness's own (`--max-turns`); only the
wall clock is enforced here. stdout and stderr are kept beside the repository (`.git/`) for
debugging but are never evidence: the transcript is the contract surface.

Provider credentials are passed through from the environment by name only; `compat:<id>`
models also get `COPPERHEAD_BASE_URL`. No model runs in this project's tests: they drive this
adapter against a stand-in CLI script that writes a real-shaped transcript.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pygit2

from cbledger.errors import UserError
from cbledger.runner.agents.base import AgentInput, AgentResult

CLI_ENV = "COPPERHEAD_CLI"
NODE_ENV = "CBLEDGER_NODE"
PROVIDER_VARIABLES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GROQ_API_KEY",
    "OPENROUTER_API_KEY",
    "MISTRAL_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "COPPERHEAD_API_KEY",
)
BASE_URL_VARIABLE = "COPPERHEAD_BASE_URL"
KILL_GRACE_SEC = 5.0


@dataclass(frozen=True)
class CopperheadCli:
    node: str
    script: Path

    def command(self, *args: str) -> list[str]:
        return [self.node, str(self.script), *args]

    def version(self) -> str | None:
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
        """The git commit of the copperhead checkout the CLI lives in, if it is one."""
        found = pygit2.discover_repository(str(self.script.parent))
        if not found:
            return None
        try:
            return str(pygit2.Repository(found).head.target)
        except pygit2.GitError:
            return None


def locate(cli: str | Path | None = None) -> CopperheadCli | None:
    """The CLI from the option, else `$COPPERHEAD_CLI`; None when neither names a file."""
    script = cli or os.environ.get(CLI_ENV)
    if not script:
        return None
    path = Path(script).expanduser().resolve()
    if not path.is_file():
        raise UserError(f"copperhead CLI {path} does not exist (from --copperhead-cli or ${CLI_ENV})")
    node = os.environ.get(NODE_ENV) or shutil.which("node")
    if node is None:
        raise UserError("node is required to run the copperhead CLI (Node >= 20) but was not found")
    return CopperheadCli(node, path)


def basic_environment() -> dict[str, str]:
    """What any copperhead process gets of the runner's environment (no credentials)."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "NODE_OPTIONS", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE")
    return {k: os.environ[k] for k in keep if k in os.environ}


def agent_environment(model_id: str) -> dict[str, str]:
    """A clean environment: the basics plus provider variables, never the runner's others."""
    env = basic_environment()
    for name in PROVIDER_VARIABLES:
        if name in os.environ:
            env[name] = os.environ[name]
    if model_id.startswith("compat:"):
        if BASE_URL_VARIABLE not in os.environ:
            raise UserError(f"model {model_id} is an OpenAI-compatible route: set ${BASE_URL_VARIABLE}")
        env[BASE_URL_VARIABLE] = os.environ[BASE_URL_VARIABLE]
    return env


def run_capped(cmd: list[str], cwd: Path, env: dict[str, str], wall_clock_sec: float, log_dir: Path) -> tuple[int | None, bool]:
    """Runs `cmd` in its own process group; returns (exit code, killed at the cap)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / "stdout.log", "wb") as out, open(log_dir / "stderr.log", "wb") as err:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
        try:
            return proc.wait(timeout=wall_clock_sec), False
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return None, True
        except BaseException:
            # Ctrl-C of the runner: the harness is in its own session, so the terminal's SIGINT
            # never reaches it; left alone it would run on, and keep spending, after we exit.
            _kill_group(proc)
            raise


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + KILL_GRACE_SEC
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


class CopperheadAgent:
    kind = "agent"

    def __init__(self, cli: CopperheadCli):
        self.cli = cli

    def run(self, inp: AgentInput) -> AgentResult:
        manifest = inp.task.manifest
        if manifest.mode != "do":
            raise UserError(f"task {manifest.id}: mode {manifest.mode!r} is not driven by this runner yet; only `do`")
        prompt = manifest.request.prompt or ""
        args = ["--repo", str(inp.sandbox), "--json", "do", prompt, "--model", inp.model_id, "--max-turns", str(inp.max_turns)]
        env = agent_environment(inp.model_id)
        if inp.ablations.prompt_variant:
            env["COPPERHEAD_PROMPT_VARIANT"] = inp.ablations.prompt_variant
        if inp.ablations.tool_subset:
            env["COPPERHEAD_TOOLS"] = ",".join(inp.ablations.tool_subset)
        log_dir = inp.sandbox / ".git" / "cbledger-agent"
        code, killed = run_capped(self.cli.command(*args), inp.sandbox, env, manifest.caps.wall_clock_sec, log_dir)
        provider = "openai-compat" if inp.model_id.startswith("compat:") else None
        if killed:
            return AgentResult(runner_exit="cap-exceeded", note=f"killed at the {manifest.caps.wall_clock_sec}s wall-clock cap", provider=provider)
        if code != 0:
            return AgentResult(note=f"copperhead exited {code}", provider=provider)
        return AgentResult(provider=provider)
