"""envforge from a notebook: run it as `python examples/notebook.py` (or paste the cells into Jupyter).

Everything below runs inside a running event loop, as a notebook cell does, so it shows that the
sync calls work there. Needs the Gymnasium extra: pip install -e '.[test,gym,inspect]'.
"""
import asyncio
from pathlib import Path

from gymnasium.utils.env_checker import check_env

import envforge

ROOT = Path(__file__).resolve().parent.parent
CRATE_DOCK = ROOT / "generated_envs" / "reference" / "crate_dock"


async def notebook() -> None:
    # %% Open an environment folder (read as data; its code only ever runs in the sandbox).
    env = envforge.open(CRATE_DOCK)
    print(f"{env.name}: {len(env.levels())} test levels, max_steps {env.max_steps}")
    print(env.describe_actions())

    # %% Step by step, in the sandbox: a session (as `envforge play` parses actions, or a dict).
    with env.session() as s:
        s.reset("level_01")
        step = s.step("move south")
        print(f"session: reward {step.reward:g}, terminated={step.terminated}, truncated={step.truncated}")

    # %% A Gymnasium environment: play a seeded episode with random actions.
    gym_env = envforge.make(CRATE_DOCK)
    gym_env.action_space.seed(7)
    observation, info = gym_env.reset(seed=7)
    print(f"level {info['level']}, action space {gym_env.action_space}\n{observation}")
    total, terminated, truncated, steps = 0.0, False, False, 0
    while not (terminated or truncated):
        action = gym_env.action_space.sample()
        observation, reward, terminated, truncated, info = gym_env.step(action)
        total, steps = total + reward, steps + 1
    print(f"episode: {steps} steps, total reward {total:g}, terminated={terminated}, truncated={truncated}")

    # %% Gymnasium's own checker.
    check_env(gym_env)
    gym_env.close()
    print("check_env: passed")

    # %% Evaluate agents through the Python API (the sync form works inside this running loop). Its
    # defaults are the command's (3 runs, records in ./evaluation); here 1 run, a folder per agent,
    # and resume=True so that running the cell again reuses what is recorded.
    for agent in ("random", "planner"):
        result = envforge.evaluate(CRATE_DOCK, agent=agent, max_levels=2, runs=1, out=f"runs/notebook-{agent}",
                                   resume=True)
        print(f"{agent}: mean normalized reward {result.overall['mean_normalized']:.3f} over "
              f"{len(result.episodes)} episodes; stops: {[e.stop_reason for e in result.episodes]}")

    # %% Generate environments: the offline demo (recorded model replies; no key needed).
    demo = envforge.generate(ROOT / "examples" / "themes.txt", "runs/api-demo", provider="replay", resume=True)
    print(f"generate: accepted {sorted(e.name for e in demo.accepted)}, rejected {sorted(demo.rejected)}")


asyncio.run(notebook())
