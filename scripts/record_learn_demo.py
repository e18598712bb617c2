"""Record the offline demo of `envforge learn` with the product itself.

A deterministic scripted "model" (ScriptedModel) answers over the loopback server of the tests
(pipeline/testing/llm_server.py, the real OpenAI wire format), and the real command runs against it:

    envforge learn generated_envs/reference/crate_dock generated_envs/reference/tide_pool
        --methods all --iterations 2 --train-levels 2 --test-levels 3 --runs 1
        --model openai/gpt-5-mini --base-url LOOPBACK --record examples/replay --no-cache

It writes examples/replay/learn-<env>-<method>/ (one theme per run and the baselines) and
examples/replay/learn/settings.json (the sizes above, which a replay uses by default, so
`envforge learn generated_envs/reference/* --provider replay --methods all --iterations 2` asks
exactly the recorded questions). The request summaries are shortened to keep the recording small
(replay reads only the responses). It then replays the recording into a
fresh folder and checks that the report comes out the same.

    python scripts/record_learn_demo.py

The scripted model plays like a weak agent that gets better when its instructions state the rule
that matters: on crate_dock what the dynamics analysis finds (check the tile beyond a crate before
pushing), on tide_pool what the instruction diagnosis finds (climb before the tide rises); a code
agent's "plan first" helps on crate_dock and costs steps on tide_pool. So methods interact with
environments as in the paper, and the numbers show the machinery, not any model's skill.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections import deque
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from envforge.pipeline import records as files  # noqa: E402
from envforge.pipeline.testing.llm_server import LLMServer, Reply  # noqa: E402

REPLAY = ROOT / "examples" / "replay"
ENVS = [ROOT / "generated_envs" / "reference" / name for name in ("crate_dock", "tide_pool")]
DEMO_FLAGS = ["--methods", "all", "--iterations", "2", "--train-levels", "2", "--test-levels", "3", "--runs", "1"]
KEEP_CHARS = {"learn-act": 0, "learn-analyze": 1500, "learn-rewrite": 1500}  # per message of a request summary

RULES = {  # env -> signal -> the rule its analysis finds
    "crate_dock": {"dynamics": "Rule: before each push, check that the tile beyond the crate is floor or a dock, "
                               "never a wall or a corner.",
                   "instruction": "Rule: never walk into a wall twice in a row; after a blocked move, turn."},
    "tide_pool": {"dynamics": "Rule: the tide rises every 5 steps and floods every tile at or below its level.",
                  "instruction": "Rule: when the tide will rise within 2 steps, climb to the highest tile in view."},
}
SKILL = {  # env -> phrase in the agent's prompt -> how much more often it plays the good move
    "crate_dock": {RULES["crate_dock"]["dynamics"]: 0.45, RULES["crate_dock"]["instruction"]: 0.15, "Plan first": 0.1},
    "tide_pool": {RULES["tide_pool"]["dynamics"]: 0.15, RULES["tide_pool"]["instruction"]: 0.45, "Plan first": -0.1},
}
BASE_SKILL = 0.3
MOVES = {"north": (0, -1), "south": (0, 1), "east": (1, 0), "west": (-1, 0)}


class ScriptedModel:
    """Both models of the demo; a reply is a function of the request alone."""

    def __call__(self, body: dict) -> Reply:
        messages = body.get("messages") or []
        system = "\n".join(m["content"] for m in messages if m["role"] == "system")
        user = messages[-1]["content"] if messages else ""
        text = optimizer(user) if system.startswith("You improve an AI agent") else agent(system, user)
        chars = sum(len(m.get("content") or "") for m in messages)
        limit = body.get("max_completion_tokens") or body.get("max_tokens") or 4096
        return Reply(text, input_tokens=chars // 4 + 1, output_tokens=min(len(text) // 4 + 1, limit))

    def rule(self, server: LLMServer):
        return lambda n: self(server.requests[n - 1]["body"])


# -- the optimizer -------------------------------------------------------------------
def optimizer(task: str) -> str:
    env = re.search(r"^Environment: (\S+)", task, re.M).group(1)
    if "== Task: dynamics analysis ==" in task or "== Task: instruction diagnosis ==" in task:
        signal = "dynamics" if "dynamics analysis" in task else "instruction"
        episodes = task.count("--- Episode ")
        return (f"Read {episodes} episode(s).\nFailures: the agent often moves without a plan and repeats "
                f"blocked moves.\nStrategies:\n{RULES[env][signal]}\nConfidence: 0.6")
    rules = re.findall(r"^Rule: .*$", task.split("== Analysis", 1)[1], re.M)
    if "== Task: rewrite the instruction ==" in task:
        current = task.split("== Current instruction ==\n", 1)[1].split("\n\n== Action space", 1)[0]
        new = [r for r in rules if r not in current]
        header = "" if "Learned rules:" in current else "\n\nLearned rules:"
        return f"<instruction>\n{current}{header}\n" + "\n".join(new) + "\n</instruction>"
    code = task.split("```python\n", 1)[1].split("```", 1)[0]
    if env == "tide_pool" and "Rule: when the tide" in task and "failed its check" not in task \
            and "LEARNED_RULES" not in code:
        return "```python\nimport subprocess\n\nclass Agent:\n    def act(self, turn):\n        return {}\n```"
    return "Here is the new agent.\n```python\n" + add_rules(code, rules) + "```\n"


def add_rules(code: str, rules: list[str]) -> str:
    """The agent code with `rules` in a LEARNED_RULES list shown in its system prompt."""
    if "LEARNED_RULES = [" not in code:
        code = code.replace("\n\nclass Agent:", "\n\nLEARNED_RULES = [\n]\n\n\nclass Agent:", 1)
        code = code.replace("        self.system = env[\"system\"]\n",
                            "        self.system = env[\"system\"]\n        self.system += \"\\n\\nAgent rules "
                            "(Plan first: think two moves ahead):\\n\" + \"\\n\".join(LEARNED_RULES)\n", 1)
    for rule in rules:
        if json.dumps(rule) not in code:
            code = code.replace("LEARNED_RULES = [\n", f"LEARNED_RULES = [\n    {json.dumps(rule)},\n", 1)
    return code


# -- the agent -----------------------------------------------------------------------
def agent(system: str, user: str) -> str:
    observation = user.split("==== Now, your observation is: ====", 1)[-1].strip()
    env = "crate_dock" if "crates on docks" in observation else "tide_pool"
    skill = BASE_SKILL + sum(w for phrase, w in SKILL[env].items() if phrase in system)
    luck = _uniform(system + user)
    if luck < 0.02:
        return "I am not sure what to do here."  # a reply without an action: a format error
    if luck < 0.02 + min(0.95, max(0.0, skill)):
        action, why = good_move(env, observation), "the move that makes progress"
    else:
        names = ["north", "south", "east", "west", None]
        pick = names[int(_uniform(user + "random") * len(names))]
        action, why = ({"action": "move", "params": {"direction": pick}} if pick else {"action": "wait", "params": {}},
                       "trying something")
    return f"<thinking_memory>{why}</thinking_memory>\n<action>{json.dumps(action)}</action>"


def good_move(env: str, observation: str) -> dict:
    direction = crate_move(observation) if env == "crate_dock" else tide_move(observation)
    return {"action": "move", "params": {"direction": direction}} if direction else {"action": "wait", "params": {}}


def crate_move(observation: str) -> str | None:
    """The first move of a shortest solution (breadth-first over agent and crates)."""
    lines = observation.splitlines()
    board = [ln for ln in lines[1:] if ln and not ln.startswith(("Legend", "Last action", "Status"))]
    cells = {(x, y): ch for y, row in enumerate(board) for x, ch in enumerate(row)}
    walls = {p for p, ch in cells.items() if ch == "#"}
    docks = {p for p, ch in cells.items() if ch in "o*+"}
    crates = frozenset(p for p, ch in cells.items() if ch in "$*")
    start = next((p for p, ch in cells.items() if ch in "@+"), None)
    if start is None:
        return None
    seen, queue = {(start, crates)}, deque([(start, crates, None)])
    while queue and len(seen) < 20_000:
        pos, boxes, first = queue.popleft()
        for name, (dx, dy) in MOVES.items():
            nxt = (pos[0] + dx, pos[1] + dy)
            if nxt in walls:
                continue
            moved = boxes
            if nxt in boxes:
                beyond = (nxt[0] + dx, nxt[1] + dy)
                if beyond in walls or beyond in boxes:
                    continue
                moved = (boxes - {nxt}) | {beyond}
            if moved <= docks:
                return first or name
            if (nxt, moved) not in seen:
                seen.add((nxt, moved))
                queue.append((nxt, moved, first or name))
    return None


def tide_move(observation: str) -> str | None:
    """Step on a shell in view; early on, wander over dry tiles well above the tide; from step 12,
    climb to the highest dry neighbour and wait on high ground."""
    step = int(re.search(r"Step (\d+)/", observation).group(1))
    tide = int(re.search(r"tide level (\d)", observation).group(1))
    here = int(re.search(r"on a tile of height (\d)", observation).group(1))
    view = observation.split("View (north is up):\n", 1)[1].splitlines()[:3]
    around = {"north": view[0][1], "south": view[2][1], "west": view[1][0], "east": view[1][2]}
    for name, ch in around.items():
        if ch == "*":
            return name
    heights = {name: int(ch) for name, ch in around.items() if ch.isdigit() and int(ch) > tide}
    if step < 12:
        safe = sorted(n for n, h in heights.items() if h > tide + 1)
        return safe[int(_uniform(observation) * len(safe))] if safe else None
    if here >= 7:
        return None
    return max(heights, key=lambda n: (heights[n], n)) if heights else None


def _uniform(text: str) -> float:
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16) / 16 ** 12


# -- recording -----------------------------------------------------------------------
def _scores(results: dict) -> dict:
    return {m: {e: r and (r["score"], r["lineage"]) for e, r in row.items()} for m, row in results["runs"].items()}


def learn(argv: list[str]) -> int:
    from envforge.pipeline.cli import main

    return main(["learn", *map(str, ENVS), *DEMO_FLAGS, *argv])


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as YAML blocks, as the recorder writes them."""


_Dumper.add_representer(str, lambda d, text: d.represent_scalar("tag:yaml.org,2002:str", text,
                                                                 style="|" if "\n" in text else None))


def shorten(folder: Path) -> None:
    """Request summaries cut to KEEP_CHARS per message, the agent's left out (replay reads only the
    responses; the demo's study folder holds every prompt in its trajectories)."""
    for path in folder.glob("learn-*/*/*.yaml"):
        keep = KEEP_CHARS[path.parent.name]
        header, _, body = path.read_text(encoding="utf-8").partition("request:")
        doc = yaml.safe_load("request:" + body)
        if keep == 0:  # the agent's calls: who asked is kept, the prompt is not
            doc["request"]["messages"] = f"not kept ({len(doc['request'].get('messages', []))} messages)"
        for m in doc["request"]["messages"] if keep else []:
            content = m.get("content", "").rstrip()
            if len(content) > keep:
                content = content[:keep].rstrip() + f"\n[... {len(content) - keep} characters not kept]"
            m["content"] = "\n".join(line.rstrip() for line in content.splitlines())
        files.write_text(path, header + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100))


def main() -> int:
    for old in [*REPLAY.glob("learn-*"), REPLAY / "learn"]:
        shutil.rmtree(old, ignore_errors=True)
    server = LLMServer()
    server.rule = ScriptedModel().rule(server)
    server.start()
    os.environ.setdefault("OPENAI_API_KEY", "loopback")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            status = learn(["--model", "openai/gpt-5-mini", "--base-url", server.openai_url, "--record", str(REPLAY),
                            "--no-cache", "--out", f"{tmp}/recorded"])
        finally:
            server.stop()
        if status != 0:
            return status
        shorten(REPLAY)
        status = learn(["--provider", "replay", "--out", f"{tmp}/replayed"])
        recorded, replayed = (json.loads(Path(f"{tmp}/{name}/report/results.json").read_text())
                              for name in ("recorded", "replayed"))
        same = _scores(recorded) == _scores(replayed)
        print(f"recorded {server.count()} calls; replay {'reproduces' if same else 'DOES NOT reproduce'} the scores")
        return status if same else 1


if __name__ == "__main__":
    sys.exit(main())
