"""Agents behind one small interface: given a prepared sandbox, act, and say how it ended.

`gold` and `noop` are the suite's own discrimination check (scripted, no model, no network);
`copperhead` drives the real harness CLI; `replay` re-materializes a preserved run. Whatever
the agent, evidence is read afterwards from the sandbox alone.
"""

from cbledger.runner.agents.base import Agent, AgentInput, AgentResult

__all__ = ["Agent", "AgentInput", "AgentResult"]
