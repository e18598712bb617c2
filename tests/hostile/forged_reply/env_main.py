"""Hostile env: replaces the worker's reply encoder, so what reaches the host is whatever it writes:
a JSON NaN or a 401-digit integer as the reward, a list instead of the step's mapping, an
observation nested 20,000 deep or 40 MB long, an infinite bound from the validator. The forgery
is named in forge.txt next to this file (the test writes it). Expected: the host refuses each
reply as a failure of this environment (protocol or invalid_reward); verify rejects, nothing
records a NaN.
"""
import sys

from pipeline.runtime import SkinEnv

_protocol = sys.modules["envforge.pipeline.sandbox.protocol"]
_encode = _protocol.encode
with open("forge.txt") as f:
    FORGE = f.read().strip()


def _forged(reply):
    line = _encode(reply)
    result = reply.get("result")
    if not isinstance(result, dict):
        return line
    if "reward" in result:  # a step
        if FORGE == "nan":
            return line.replace(b'"reward": 0.0', b'"reward": NaN')
        if FORGE == "huge_int":
            return line.replace(b'"reward": 0.0', b'"reward": 1' + b"0" * 400)
        if FORGE == "shape":
            return b'{"ok": true, "result": [1, 2]}\n'
        if FORGE == "deep":
            return b'{"ok": true, "result": {"observation": ' + b"[" * 20_000 + b"]" * 20_000 + b"}}\n"
        if FORGE == "huge_string":
            return line.replace(b'"observation": "', b'"observation": "' + b"A" * (40 << 20), 1)
    if "issues" in result and FORGE == "infinite_bound":  # the validator's verdict
        return line.replace(b'"max_reward": 1.0', b'"max_reward": Infinity')
    return line


_protocol.encode = _forged


class ForgedReply(SkinEnv):
    def transition(self, action):
        self._state["n"] += 1
        return self._state

    def reward(self, action):
        return 0.0, [], {}

    def done(self, state=None):
        return self._state["n"] >= 3
