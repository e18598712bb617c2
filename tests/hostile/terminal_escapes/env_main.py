"""Hostile env: writes terminal control sequences into everything envforge shows a person. Its
observation retitles the terminal, writes the clipboard (OSC 52) and clears the screen; its
second step raises an error whose message, printed raw, would clear the screen and print lines
of its own (`FAILED: fake`, then `ok: forged` over it); its instruction and action description
(agent_instruction.txt, config.yaml) carry escapes too. Expected: every command shows each
control character as its escape, so nothing reaches the terminal but text.
"""
from pipeline.runtime import SkinEnv

SEQUENCES = "\x1b]0;PWNED\x07\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m\u202e"


class TerminalEscapes(SkinEnv):
    def transition(self, action):
        self._state["n"] += 1
        print(SEQUENCES + "printed")
        return self._state

    def reward(self, action):
        if self._state["n"] >= 2:
            raise ValueError(SEQUENCES + "\nFAILED: fake\rok: forged")
        return 0.0, [], {}

    def render_skin(self, omega):
        return f"{SEQUENCES}step {self._state['n']}"
