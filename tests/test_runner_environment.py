"""The environment half of the stamp names the OS the way a reader would."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest

from cbledger.runner import environment


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux machine's os-release")
def test_the_os_is_the_distribution_pretty_name_on_linux():
    release = next(p for p in (Path("/etc/os-release"), Path("/usr/lib/os-release")) if p.is_file())
    pretty = next(line.split("=", 1)[1].strip().strip('"') for line in release.read_text().splitlines() if line.startswith("PRETTY_NAME="))
    assert environment.os_name() == pretty
    assert environment.probe().os == pretty


def test_without_an_os_release_the_kernel_is_named(monkeypatch):
    monkeypatch.setattr(environment.sys, "platform", "freebsd14")
    monkeypatch.setattr(platform, "system", lambda: "FreeBSD")
    monkeypatch.setattr(platform, "release", lambda: "14.1-RELEASE")
    assert environment.os_name() == "FreeBSD 14.1-RELEASE"
