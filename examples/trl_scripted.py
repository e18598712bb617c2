"""envforge environments in TRL's `environment_factory`, driven offline the way GRPOTrainer drives them,
by a scripted policy instead of a model: each row of `train_dataset` resets an instance the factory
made (TRL: `reset(**row)`, its text appended to the row's prompt), the policy's tool calls are calls of
the instance's public methods (TRL finds them with inspect.getmembers and calls `tool(**arguments)`),
and `get_reward()` scores the rollout. `--policy witness` plays each level's certified max-reward
witness (level_max_rewards.json: it scores 1), `--policy random` random tool calls (seeded).

    python examples/trl_scripted.py generated_envs/reference/crate_dock --max-levels 3

With TRL (which brings torch) and a model, the same object trains:

    from trl import GRPOConfig, GRPOTrainer
    trainer = GRPOTrainer(model="Qwen/Qwen3-0.6B", args=GRPOConfig(max_steps=100),
                          train_dataset=envs.train_dataset, environment_factory=envs.environment_factory)
    trainer.train()
"""
from __future__ import annotations

import argparse
import inspect
import json
import random
from pathlib import Path

from envforge.integrations.trl import TRLEnvironments


def tools_of(env) -> dict:
    """The instance's tools, found as GRPOTrainer finds them."""
    return {name: method for name, method in inspect.getmembers(env, predicate=inspect.ismethod)
            if name not in ("reset", "get_reward") and not name.startswith("_")}


def witness_calls(row: dict):
    """The level's certified witness as tool calls: (name, arguments)."""
    env_dir = Path(row["env_dir"])
    entries = json.loads((env_dir / "level_max_rewards.json").read_text())["levels"]
    for action in entries[Path(row["level"]).name]["witness"]:
        yield action["action"], action.get("params") or {}


def random_calls(env, rng: random.Random, steps: int):
    """Random tool calls: an action, and for each parameter one of its declared choices."""
    schemas = {tool["name"]: tool["parameters"].get("properties", {}) for tool in env.SPEC.tools}
    for _ in range(steps):
        name = rng.choice(sorted(schemas))
        yield name, {param: rng.choice(prop["enum"]) if prop.get("enum") else 0
                     for param, prop in schemas[name].items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", help="an environment folder, or a folder holding some")
    parser.add_argument("--split", default="test")
    parser.add_argument("--max-levels", type=int, default=None)
    parser.add_argument("--policy", choices=["witness", "random"], default="witness")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    envs = TRLEnvironments(args.path, split=args.split, max_levels=args.max_levels)
    factory = envs.environment_factory
    rng = random.Random(args.seed)
    rewards = []
    for row in envs.rows:  # train_dataset holds these rows as a datasets.Dataset (datasets comes with TRL)
        make = factory[row["environment"]] if isinstance(factory, dict) else factory
        env = make()
        reset = {k: v for k, v in row.items() if k != "environment"} if isinstance(factory, dict) else row
        prompt = row["prompt"][-1]["content"] + env.reset(**reset)
        tools = tools_of(env)
        calls = (witness_calls({**row, "env_dir": str(env.SPEC.path)}) if args.policy == "witness"
                 else random_calls(env, rng, env.SPEC.max_steps))
        shown = prompt
        for name, arguments in calls:
            shown = tools[name](**arguments)
            if "The episode ended after" in shown:
                break
        reward = env.get_reward()
        rewards.append(reward)
        print(f"{row['environment']} {row['level']}: {args.policy} policy, tools {', '.join(sorted(tools))}: "
              f"reward {reward}")
    print(f"{len(rewards)} rollout(s), mean reward {sum(rewards) / len(rewards):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
