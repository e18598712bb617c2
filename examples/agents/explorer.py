"""An example of your own agent for `envforge evaluate` (README: *Your own agent*).

    envforge evaluate generated_envs/reference/crate_dock --agent examples/agents/explorer.py:Explorer

It needs no model: it plays the environment's declared actions (from its DSL, `env.configs`) and
prefers those that changed what it sees, remembering which action left which observation
unchanged. Swap `choose` for a model call to make it a model agent.
"""
import itertools
import json
import random


def declared_actions(configs):
    """Every declared action with every combination of its enumerated parameter values."""
    out = []
    for action in (configs.get("transition") or {}).get("actions") or []:
        params = action.get("params") or []
        if any(not p.get("enum") for p in params):
            continue  # a free-form parameter: this simple agent leaves the action out
        for values in itertools.product(*(p["enum"] for p in params)):
            out.append({"action": action["name"], "params": {p["name"]: v for p, v in zip(params, values)}})
    return out


class Explorer:
    def run(self, env, env_info):
        rng = random.Random(f"{env_info['env_name']}|{env_info['world_id']}|{env_info['run']}")
        actions = declared_actions(env.configs)
        observation = env.reset(mode="load", world_id=env_info["world_id"])
        stuck = set()  # (observation, action) pairs that changed nothing
        total, steps = 0.0, 0
        while actions and not env.done() and steps < env_info["max_step"]:
            action = self.choose(observation, actions, stuck, rng)
            _, reward, done, info = env.step(action)
            if info["skinned"] == observation:
                stuck.add((observation, json.dumps(action, sort_keys=True)))
            observation, total, steps = info["skinned"], total + reward, steps + 1
        return {"total_reward": total, "steps": steps}

    def choose(self, observation, actions, stuck, rng):
        fresh = [a for a in actions if (observation, json.dumps(a, sort_keys=True)) not in stuck]
        return rng.choice(fresh or actions)
