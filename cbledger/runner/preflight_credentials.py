"""Credential preflight: a run whose route has no usable key is refused before the first run.

Without it a keyed run still starts, copperhead stops before its first model call, and the run is
recorded as one that never reached the model: a whole campaign spent on nothing. So before any
sandbox exists each route's key is checked: present (the variable the route reads, named in the
refusal), well formed (the provider's key shape), and, unless the operator opts out
(`--no-key-check`), accepted by one cheap authenticated request the provider offers (listing its
models; it costs no tokens), sent to the base URL the run itself will use.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

from cbledger.errors import UserError
from cbledger.runner import budget
from cbledger.runner.agents.copperhead import (
    BASE_URL_VARIABLE,
    KEY_ENV_VARIABLE,
    NATIVE_UPSTREAMS,
    SAVED_LOGIN_PREFIXES,
    is_loopback,
    no_base_url,
    recording_route,
)
from cbledger.runner.budget import MoneyLimits

#: what a well-formed key of each native route looks like
KEY_SHAPES = {
    "anthropic": re.compile(r"sk-ant-[A-Za-z0-9_-]{20,}"),
    "openai": re.compile(r"sk-[A-Za-z0-9_-]{20,}"),
}
PROBE_TIMEOUT_SEC = 15
ANTHROPIC_VERSION = "2023-06-01"


@dataclass(frozen=True)
class Credential:
    """A route's key as preflight sees it: the variable, and the base URL a probe goes to."""

    model_id: str
    route: str  # openai | anthropic | openai-compat | saved-login
    variable: str | None  # None: the route needs no key (a loopback compat endpoint, a saved login)
    base_url: str | None

    @property
    def describe(self) -> str:
        if self.route == "saved-login":
            return f"{self.model_id}: saved login of its provider's own CLI (not checked)"
        if self.variable is None:
            return f"{self.model_id}: loopback endpoint {self.base_url}, no key needed"
        return f"{self.model_id}: ${self.variable} for {self.base_url}"


def credential(model_id: str, env: Mapping[str, str]) -> Credential:
    route = recording_route(model_id)
    if route is None or model_id.split(":", 1)[0] in SAVED_LOGIN_PREFIXES:
        return Credential(model_id, "saved-login", None, None)
    if route == "openai-compat":
        base = env.get(BASE_URL_VARIABLE)
        named = (env.get(KEY_ENV_VARIABLE) or "").strip() or None
        if named is None and base and not is_loopback(base):
            named = "OPENAI_API_KEY"  # what copperhead would read (and key_variables refuses)
        return Credential(model_id, route, named, base)
    variable = "ANTHROPIC_API_KEY" if route == "anthropic" else "OPENAI_API_KEY"
    base_var, default = NATIVE_UPSTREAMS[route]
    return Credential(model_id, route, variable, env.get(base_var) or default)


def problem(cred: Credential, env: Mapping[str, str]) -> str | None:
    """Why the key cannot work, without a request; None when it is present and well formed."""
    if cred.route == "openai-compat" and not cred.base_url:
        # no endpoint is no route at all: `doctor` said "loopback endpoint None, no key needed"
        return no_base_url(cred.model_id)
    if cred.variable is None:
        return None
    value = env.get(cred.variable)
    if value is None or not value.strip():
        return f"--model {cred.model_id} needs ${cred.variable}, which is not set"
    if value != value.strip() or any(c.isspace() for c in value):
        return f"${cred.variable} holds white space: not a key"
    shape = KEY_SHAPES.get(cred.route)
    if shape is not None and not shape.fullmatch(value):
        return f"${cred.variable} is not shaped like {'an' if cred.route[:1] in 'aeiou' else 'a'} {cred.route} key ({shape.pattern})"
    return None


def probe(cred: Credential, env: Mapping[str, str], timeout: float = PROBE_TIMEOUT_SEC) -> str | None:
    """One authenticated request that spends no tokens (the provider's model list); why the key
    was not accepted, or None. A provider that cannot be reached is a refusal too: the runs would
    fail the same way."""
    if cred.variable is None or cred.base_url is None:
        return None
    key = env[cred.variable]
    base = cred.base_url.rstrip("/")
    if cred.route == "anthropic":
        url = base + ("/models" if base.endswith("/v1") else "/v1/models")
        headers = {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}
    else:
        url, headers = base + "/models", {"Authorization": f"Bearer {key}"}
    request = urllib.request.Request(url, headers=headers, method="GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return f"${cred.variable} was refused by {url} (HTTP {exc.code}): the key is not valid there"
        return f"checking ${cred.variable} against {url} failed (HTTP {exc.code}); --no-key-check skips this check"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"checking ${cred.variable} against {url} failed ({reason}); --no-key-check skips this check"
    return None


def require(model_id: str, *, check_with_provider: bool = True, env: Mapping[str, str] | None = None) -> Credential:
    """Refuses, with one line naming the variable, a route whose key is missing, malformed or
    refused; returns what was checked."""
    source = os.environ if env is None else env
    cred = credential(model_id, source)
    why = problem(cred, source) or (probe(cred, source) if check_with_provider else None)
    if why is not None:
        raise UserError(why)
    return cred


def money_preflight(plan, view, limits: MoneyLimits | None, *, scripted: bool, dask: bool) -> budget.Guard | None:
    """A real model's plan: its key checked (`require`) and its money limits set up; a scripted or
    harness-only plan needs neither. Limits are enforced by this machine's proxies: refused on Dask."""
    if plan.agent != "copperhead" or scripted:
        return None
    require(plan.model_id, check_with_provider=limits.key_check if limits is not None else True)
    guard = budget.guard(plan.model_id, view.pricing, limits)
    if guard is not None and dask:
        refuse_limits_elsewhere(limits)
    return guard


def refuse_limits_elsewhere(limits: MoneyLimits | None) -> None:
    """Money limits are enforced by this machine's recording proxies, so a plan run elsewhere
    (on Dask) cannot have them."""
    if limits is not None and (limits.max_cost_usd is not None or limits.budget_usd is not None):
        raise UserError("--max-cost-usd and --budget-usd are enforced by this machine's recording proxies: run with --executor local")
