"""What one model call costs in CPU, and how much of it is building a pydantic-ai Agent per call.

On the tiny project's agent (bench/perf/perf_common.py; tool-mode structured output, simulator wrapped as FunctionModel,
latency 0), sequentially, N times each:

1. `call_model()` as AQVEN calls it today (aqven/models/call.py: builds an Agent for every call, then runs it);
2. `Agent(...)` construction alone, with the same arguments call_model gives it;
3. the Agent built once and reused: `agent.run(prompt, model=<this call's FunctionModel>)` — what call_model would
   do with an Agent cached per (agent spec, output plan); a proposal for models/call.py, not a change made here.

    .venv/bin/python bench/perf/perf_pydantic_ai.py [--calls 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"

import perf_common as pc


async def main(calls: int) -> None:
    from pydantic_ai import Agent

    from aqven.engine.compile import compile_flow
    from aqven.models.call import ModelCall, call_model, model_settings
    from aqven.models.outputs import plan_output
    from aqven.models.simulate import SimContext, load_simulator, simulated_model
    from aqven.project.loader import load_project

    with tempfile.TemporaryDirectory() as tmp:
        root = pc.write_tiny_project(Path(tmp) / "p", cases=1)
        project = load_project(root)
        agent = project.agents["fast"]
        schema = compile_flow(project, "one", None).nodes[0].output_schema  # the llm node's output schema
        plan = plan_output(schema)

        def make_call(i: int) -> ModelCall:
            return ModelCall(
                agent=agent,
                prompt=f"Answer: q{i}",
                output_schema=schema,
                simulate=True,
                seed=i,
                node_id="ask",
                project_root=root,
                inputs={"question": f"q{i}"},
            )

        def build_agent() -> Agent[None, object]:
            a: Agent[None, object] = Agent(
                None,
                output_type=plan.output_type(agent.output_mode),
                instructions=agent.system_prompt or None,
                retries={"output": agent.output_retries},
                model_settings=model_settings(agent),
                name=agent.id or None,
            )
            a.output_validator(plan.check)
            return a

        for i in range(50):  # warm-up
            await call_model(make_call(i))
        c = time.process_time()
        for i in range(calls):
            await call_model(make_call(i))
        today = (time.process_time() - c) / calls * 1000

        c = time.process_time()
        for _ in range(calls):
            build_agent()
        build = (time.process_time() - c) / calls * 1000

        simulator = load_simulator(agent, root)
        cached = build_agent()
        c = time.process_time()
        for i in range(calls):
            ctx = SimContext(
                agent=agent,
                node_id="ask",
                prompt=f"Answer: q{i}",
                inputs={"question": f"q{i}"},
                output_schema=schema,
                seed=i,
                plan=plan,
                latency_scale=0.0,
            )
            result = await cached.run(f"Answer: q{i}", model=simulated_model(ctx, simulator))
            plan.unwrap(result.output)
        reuse = (time.process_time() - c) / calls * 1000
    print(f"{calls} sequential calls each (load avg {os.getloadavg()[0]:.2f}); CPU ms per call:")
    print(f"  call_model() today (new Agent per call, run, usage, pricing):  {today:.2f}")
    print(
        f"  Agent(...) construction alone:                                 {build:.2f}  "
        f"({build / today * 100:.0f}% of a call)"
    )
    print(f"  cached Agent, run(model=FunctionModel) only:                   {reuse:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    asyncio.run(main(parser.parse_args().calls))
