"""What bounds a series besides its dollars: which of its agents nothing prices, and their token cap.

A call that nothing prices adds nothing to the spend, so a cap in dollars cannot stop a series whose agents are
all unpriced. The launch plan says so before the series starts (`bounds`), and an agent may declare a price
(`price:` in its file) or a `token_cap`: the most tokens a series it runs in may use, which pauses the series at
90% like the spend cap. A series' token cap is the smallest `token_cap` of its agents.
"""

from __future__ import annotations

from typing import Any

from aqven.engine.compile import compile_flow
from aqven.engine.compiled import CompiledFlow
from aqven.errors import AqvenError
from aqven.models.pricing import is_priced
from aqven.project.schema import AgentSpec
from aqven.research.experiments.workspace import Workspace
from aqven.store.records import RunRequest


def _walk_agents(flow: CompiledFlow, out: dict[str, AgentSpec]) -> None:
    for node in flow.walk():
        if node.agent is not None:
            out.setdefault(node.agent.id or node.agent.model, node.agent)
        if node.called is not None:
            _walk_agents(node.called, out)


def series_agents(ws: Workspace, *, flow_id: str, variants: list[str], experiment_id: str | None) -> list[AgentSpec]:
    """Every agent a series of this subject and these variants calls: its flows' llm nodes and its judges."""
    found: dict[str, AgentSpec] = {}
    for variant in variants:
        request = RunRequest(
            flow_id=flow_id, experiment_id=experiment_id, variant_id=variant if experiment_id else None
        )
        try:
            _walk_agents(compile_flow(ws.project, flow_id, ws.patch_for(request)), found)
        except AqvenError:
            continue  # a broken variant is refused elsewhere (NOT_RUNNABLE); it has no agents to bound
    exp = ws.experiments.get(experiment_id) if experiment_id else None
    for check in exp.spec.checks if exp is not None else []:
        if check.judge is not None and check.judge.agent in ws.project.agents:
            found.setdefault(check.judge.agent, ws.project.agents[check.judge.agent])
    return [found[k] for k in sorted(found)]


def cost_bound(agents: list[AgentSpec], *, simulated: bool) -> dict[str, Any]:
    """`{unpriced_agents, token_cap, cap_binds, text}`: whether the dollar cap can stop the series, and what does.

    `cap_binds` is False when some agent's calls will have no price (the spend is then a lower bound and does
    not grow with those calls); `token_cap` is the smallest `token_cap` of the agents (None: no token cap)."""
    unpriced = [a for a in agents if not is_priced(a.provider, a.model_name, a.price, simulated=simulated)]
    caps = [a.token_cap for a in agents if a.token_cap is not None]
    token_cap = min(caps) if caps else None
    text = None
    if unpriced:
        names = ", ".join(f"{a.id or a.model} ({a.model})" for a in unpriced)
        every = len(unpriced) == len(agents)
        text = f"the spend cap cannot stop this series: nothing prices {names}, so " + (
            "its calls add nothing to the spend" if every else "their calls add nothing to the spend"
        )
        text += (
            f"; its token cap of {token_cap:,} tokens bounds it instead"
            if token_cap is not None
            else "; declare a price (price: in the agent file) or a token_cap to bound it"
        )
    return {
        "unpriced_agents": [a.id or a.model for a in unpriced],
        "token_cap": token_cap,
        "cap_binds": not unpriced,
        "text": text,
    }
