"""The comparability stamp's environment half: which tools, in which versions, on what machine.

Probed once per suite run; a record carries exactly what was used, so results produced elsewhere
stay valid evidence about that environment while never being averaged with another one.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from cbledger.kicad.oracle import kicad_cli, kicad_cli_version


@dataclass(frozen=True)
class Environment:
    kicad_cli: str | None
    kicad_cli_version: str | None
    copperhead_version: str | None
    copperhead_commit: str | None
    runtime: str
    node_version: str | None
    platform: str
    os: str | None = None


def binary_identity(path: str) -> tuple[str, int, int]:
    """A binary as the version probe and the report cache know it: the file it resolves to,
    its size and its modification time. A binary replaced in place is another binary."""
    real = os.path.realpath(path)
    stat = os.stat(real)
    return real, stat.st_size, stat.st_mtime_ns


@functools.lru_cache(maxsize=16)
def _version_of(ask: Callable[[str], str | None], binary: tuple[str, int, int]) -> str | None:
    return ask(binary[0])


def _asked_once(ask: Callable[[str], str | None], path: str) -> str | None:
    """`ask(path)` once per process and binary: each probe starts the tool (kicad-cli takes
    about 0.4 s to say its version), and a process that runs many suites probes once per suite."""
    try:
        binary = binary_identity(path)
    except OSError:
        return ask(path)
    return _version_of(ask, binary)


def _node_version(node: str) -> str | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def node_version() -> str | None:
    node = shutil.which("node")
    return None if node is None else _asked_once(_node_version, node)


def platform_tag() -> str:
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64"}.get(machine, machine)
    return f"{sys.platform}-{arch}"


def os_name() -> str | None:
    """The operating system by name and release, as a reader would name it: the distribution's
    own `PRETTY_NAME` on Linux (`Debian GNU/Linux 12 (bookworm)`), `macOS 14.5` on a Mac, else
    the kernel's name and release."""
    if sys.platform.startswith("linux"):
        try:
            pretty = platform.freedesktop_os_release().get("PRETTY_NAME")
        except OSError:
            pretty = None
        if pretty:
            return pretty
    if sys.platform == "darwin":
        release = platform.mac_ver()[0]
        if release:
            return f"macOS {release}"
    system = " ".join(part for part in (platform.system(), platform.release()) if part)
    return system or None


def probe(copperhead=None) -> Environment:
    cli = kicad_cli()
    return Environment(
        kicad_cli=cli,
        kicad_cli_version=_asked_once(kicad_cli_version, cli) if cli else None,
        copperhead_version=copperhead.version() if copperhead else None,
        copperhead_commit=copperhead.commit() if copperhead else None,
        runtime=f"{platform.python_implementation().lower()}-{platform.python_version()}",
        node_version=node_version(),
        platform=platform_tag(),
        os=os_name(),
    )
