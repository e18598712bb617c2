"""Hostile learned agent: the same calls as the env (reach.py, beside it), made from agent code; its
thought is what each got."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reach import attempts  # noqa: E402


class Agent:
    def __init__(self, env, llm):
        self.env = env

    def act(self, turn):
        return {"action": {"action": "go", "params": {}}, "thought": json.dumps(attempts())}
