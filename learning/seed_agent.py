"""The agent_code component's starting point: envforge's ReAct agent (AutoEnv Appendix C.3) as
one standalone class, the code that agent-code methods rewrite.

Contract (the sandbox's agent host calls it; learned code must keep it):

    Agent(env, llm)
        env:  {"name", "instruction", "action_space", "actions" (names), "max_steps"}
        llm(messages, max_tokens=None) -> str
              messages: [{"role": "system" | "user" | "assistant", "content": str}] or one string.
              The call is made by envforge outside the sandbox; it raises when no answer comes.
    act(turn) -> dict, once per turn
        turn: {"step", "max_steps", "observation", "last_action_result",
               "history": [{"step", "action", "result", "reward", "error", "invalid"}, ...]}
        returns {"action": {"action": NAME, "params": {...}}, "thought": TEXT}
             or {"error": "format", "message": WHY} when the reply held no action.

It runs in the sandbox: standard library only; no files, network, processes or threads.
One object plays one episode, so it may remember what it saw.
"""
import ast
import json
import re

OUTPUT_FORMAT = """==== Output Format ====
First think step by step inside <thinking_memory></thinking_memory>: the rules you have
inferred and what you need to remember. Then give exactly one action inside <action></action>,
as a dictionary with the action's name and its parameters, for example:
<action>
{"action": "ACTION_NAME", "params": {"PARAM": "VALUE"}}
</action>"""


class Agent:
    history_shown = 10

    def __init__(self, env, llm):
        self.env = env
        self.llm = llm
        self.system = "\n\n".join([
            "==== Environment Instruction ====\n" + env["instruction"],
            "==== Action Space ====\n" + env["action_space"],
            OUTPUT_FORMAT,
        ])

    def act(self, turn):
        prompt = self.prompt(turn)
        reply = self.llm([{"role": "system", "content": self.system}, {"role": "user", "content": prompt}])
        action = parse_action(reply)
        if action is None:
            return {"error": "format", "message": "expected a dictionary with an \"action\" key inside "
                                                  "<action></action>, found " + repr(reply[:120])}
        return {"action": action, "thought": thought_of(reply)}

    def prompt(self, turn):
        lines = ["==== Past Actions ====", "Your recent actions are:"]
        for past in turn["history"][-self.history_shown:]:
            if past.get("action") is None:
                lines.append("- step %s: no action: %s" % (past["step"], past.get("error")))
            else:
                result = past.get("result") or ("invalid: %s" % past["invalid"] if past.get("invalid") else "no feedback")
                reward = " (reward %s)" % past["reward"] if past.get("reward") else ""
                lines.append("- step %s: %s -> %s%s" % (past["step"], json.dumps(past["action"]), result, reward))
        if not turn["history"]:
            lines.append("None yet.")
        lines += ["", "==== Now, your observation is: ====", str(turn["observation"])]
        if turn.get("last_action_result") and str(turn["last_action_result"]) not in str(turn["observation"]):
            lines += ["", "Result of your last action: %s" % turn["last_action_result"]]
        lines += ["", "This is step %s of at most %s." % (turn["step"], turn["max_steps"])]
        return "\n".join(lines)


def parse_action(reply):
    """The dictionary inside the last <action></action> (or, without tags, the last one with an
    "action" key), as {"action": name, "params": {...}}; None when there is none."""
    blocks = re.findall(r"<action>(.*?)</action>", reply or "", re.S | re.I)
    text = blocks[-1] if blocks else (reply or "")
    for candidate in reversed(re.findall(r"\{.*\}", re.sub(r"`{3}[A-Za-z]*", "", text), re.S)):
        data = _load(candidate)
        if isinstance(data, dict) and isinstance(data.get("action"), str):
            params = data.get("params", {})
            return {"action": data["action"].strip(), "params": params if isinstance(params, dict) else {}}
    return None


def thought_of(reply):
    found = re.search(r"<thinking_memory>(.*?)</thinking_memory>", reply or "", re.S | re.I)
    return found.group(1).strip() if found else (reply or "").split("<action>")[0].strip()


def _load(text):
    for load in (json.loads, ast.literal_eval):
        try:
            return load(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return None
