"""Where each page of the site lives, relative to the site's root: the renderer writes there,
and the read model names a task's or a model's page."""

from __future__ import annotations

import hashlib
import re


def run_page(run_id: str) -> str:
    """A run's page relative to the site root (run ids are safe path segments)."""
    return f"runs/{run_id}.html"


def _segment_name(name: str) -> str:
    """A file name for a task or model id: the id itself when it is a safe path segment, else
    its safe characters and a hash of the whole (`vendor:a/b` and `vendor_a_b` stay apart)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    if safe == name and not name.startswith("."):
        return name
    return f"{safe.lstrip('.')}-{hashlib.sha256(name.encode()).hexdigest()[:10]}"


def task_page(task_id: str) -> str:
    """One task's results across models, relative to the site root."""
    return f"tasks/{_segment_name(task_id)}.html"


def model_page(model: str) -> str:
    """One model's results across tasks, relative to the site root."""
    return f"models/{_segment_name(model)}.html"
