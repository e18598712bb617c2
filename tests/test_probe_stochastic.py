"""Derived tests on a stochastic environment, and the model agent on probe items (loopback server)."""
from __future__ import annotations

import asyncio
import json

import pytest

from envforge.pipeline.probe import make_probes
from envforge.pipeline.probe.agents import ModelProbeAgent
from envforge.pipeline.probe.items import PlanItem, PredictItem, Start
from envforge.pipeline.probe.predict import RESEED_BASE, PredictOptions
from envforge.pipeline.probe.score import score_items
from envforge.pipeline.sandbox import Worker
from envforge.pipeline.testing.llm_server import Reply
from envforge.pipeline.testing.tiny_env import write_env

pytestmark = pytest.mark.slow  # measured: seconds to minutes a test (`-m "not slow"` leaves it out)

# The corridor, except that moving right fails (you stay put) half the time.
SLIPPERY = ('        if name == "move" and params.get("direction") in ("left", "right"):\n',
            '        if name == "move" and params.get("direction") == "right" and random.random() < 0.5:\n'
            '            self._last_action_result = "slipped"\n'
            '        elif name == "move" and params.get("direction") in ("left", "right"):\n')


def test_predict_keeps_only_items_whose_truth_is_one_rendering_under_stochastic_dynamics(tmp_path):
    env = write_env(tmp_path / "slippery", replace={"env_main.py": SLIPPERY})
    (env / "env_main.py").write_text("import random\n" + (env / "env_main.py").read_text())
    made = make_probes(str(env), ("predict",), 12, seed=0, predict=PredictOptions(max_k=2, choices=4, samples=4))
    assert made.dropped["predict"].get("the truth is not one rendering (stochastic dynamics)", 0) > 0
    assert made.items, made.dropped
    with Worker(env) as worker:
        for item in made.items:
            worker.call("reset", level=item.start.level, seed=item.start.seed)
            for action in item.start.prefix:
                worker.call("step", action=action)
            handle = worker.call("snapshot")["handle"]
            for sample in range(10):  # other RNG states than the maker used
                worker.call("restore", handle=handle, reseed=RESEED_BASE + 100 + sample)
                for action in item.actions:
                    seen = worker.call("step", action=action)["observation"]
                assert [c == seen for c in item.candidates].count(True) == 1
                assert item.candidates[item.answer] == seen


def _predict_item() -> PredictItem:
    return PredictItem(id="corridor/predict/0000", env="corridor", env_dir="", skin=None, instruction="Walk.",
                       start=Start("levels/level_01.yaml"), observation="step 0: @..G..",
                       actions=[{"action": "move", "params": {"direction": "right"}}], k=1,
                       candidates=["step 1: .@.G..", "step 1: @..G..", "step 1: ..@G..", "step 1: ...@.."],
                       answer=0, sources=["truth"] + ["counterfactual_action"] * 3)


def test_model_agent_answers_predict_and_plan_items_through_the_provider(make_llm_client, llm_server, tmp_path):
    env = write_env(tmp_path / "corridor")
    plan_item = PlanItem(id="corridor/plan/0000", env="corridor", env_dir=str(env), skin=None, instruction="Walk.",
                         start=Start("levels/level_01.yaml"), observation="step 0: @..G..", target={"pos": 2},
                         target_text="pos = 2", target_observation="step 2: ..@G..", max_length=12,
                         planner_length=2, planner_plan=[{"action": "move", "params": {"direction": "right"}}] * 2)
    right = json.dumps([{"action": "move", "params": {"direction": "right"}}] * 3)
    llm_server.script = [Reply("The agent steps right. <answer>0</answer>"),
                         Reply(f"Three steps right. <plan>{right}</plan>")]

    async def main():
        async with make_llm_client("openai") as client:
            return await score_items([_predict_item(), plan_item], ModelProbeAgent(client))

    report = asyncio.run(main())
    predict, plan = report.rows
    assert predict["choice"] == 0 and predict["score"] == 1.0
    # Three steps right overshoot pos 2: executed in the sandbox, the plan fails.
    assert plan["steps"] == 3 and plan["score"] == 0.0 and plan["efficiency"] == 0.0
    sent = json.dumps(llm_server.requests[0]["body"])
    assert "step 1: ...@.." in sent and "<answer>N</answer>" in sent
