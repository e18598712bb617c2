"""One episode played an action at a time by a caller outside envforge's agent loop: a trainer's
tool call (envforge.integrations.trl) or a command in a Harbor task's container
(pipeline/api/harbor.py). The caller holds the loop; this holds the sandbox worker and evaluate's
rules for the episode (episode.Tracker: the step cap, terminated/truncated, the format-error,
invalid-action, loop and stagnation stops), so its record and normalized reward are what `envforge
evaluate` reports for the same actions.

What the player reads is what evaluate's agents read: each turn's prompt (agent_turn,
templates/agents/react_step.j2: recent turns, the observation, the last action's result, the step
count) and, once the episode is over, how it ended (templates/agents/episode_end.j2).

    episode = StepwiseEpisode(spec, level, max_reward)
    prompt = episode.start()                     # a fresh worker, reset on the level
    prompt = episode.act({"action": "move", "params": {"direction": "north"}})
    episode.done, episode.record("trl").normalized
    episode.close()
"""
from __future__ import annotations

import dataclasses
from typing import Any

from envforge.pipeline import layout
from envforge.pipeline.envfolder.action_text import ActionText
from envforge.pipeline.envfolder.level import Level
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.evaluate.episode import Decision, Limits, Tracker, Turn, env_fault
from envforge.pipeline.evaluate.model_agents import agent_turn
from envforge.pipeline.kinds import EpisodeRecord
from envforge.pipeline.prompts import render
from envforge.pipeline.sandbox import SandboxFailure, SandboxLimits
from envforge.pipeline.sandbox.outside.client import EnvClient

HISTORY = 10  # recent turns shown in each prompt, as evaluate's agents are shown them
REPLY_CHARS = 20_000  # what a turn keeps of a player's text that is no action
# evaluate's limits, but no wall clock of the episode's own: the caller's loop (a trainer's, Harbor's
# agent timeout) owns the time between actions, and a replayed episode is not the time it was played in.
LIMITS = dataclasses.replace(Limits(), episode_seconds=0.0)


class StepwiseEpisode:
    """One episode of `level` in its own sandbox worker, driven by `act` calls."""

    def __init__(self, spec: EnvSpec, level: Level | str, max_reward: float | None, max_note: str = "",
                 limits: Limits = LIMITS, skin: str | None = None, call_seconds: float = 10.0):
        self.spec, self.level, self.skin = spec, spec.level(str(level)), skin
        self.tracker = Tracker(limits, spec.max_steps, max_reward, spec.actions, max_note=max_note)
        self.call_seconds = call_seconds
        self.client: EnvClient | None = None
        self.observation: Any = None
        self.feedback: Any = None

    @property
    def done(self) -> bool:
        return self.tracker.stop_reason is not None

    def start(self) -> str:
        """Start the worker and reset it on the level; the first turn's prompt (or, when the
        environment did not start, how the episode ended)."""
        try:
            self.client = EnvClient.start(self.spec, SandboxLimits(call_seconds=self.call_seconds), skin=self.skin)
            first = self.client.reset(self.level)
        except SandboxFailure as f:
            self.tracker.stop(env_fault(f), str(f))
            return self.ending()
        self.tracker.start(first)
        self.observation = first.observation
        return self.prompt()

    def act(self, action: dict | None, error: str = "") -> str:
        """One turn: `action` ({"action": NAME, "params": {...}}) stepped in the environment, or, with
        `action` None, a turn that held no action (`error` says why: a format error, counted as
        evaluate counts one). Returns the next turn's prompt, or how the episode ended."""
        if self.done:
            return self.ending()
        if action is None:
            self.tracker.decided(Decision(error="format", message=error or "no action"))
        else:
            self.tracker.decided(Decision(action=action))
            try:
                out = self.client.step(action)
            except SandboxFailure as f:
                self.tracker.stop(env_fault(f), str(f))
            else:
                self.tracker.stepped(action, out)
                self.observation, self.feedback = out.observation, out.last_action_result
        return self.ending() if self.done else self.prompt()

    def act_text(self, text: str) -> str:
        """One turn from an action typed as `envforge play` reads one (`move north`, `move
        direction=north`, JSON); text that is no action is a format error turn."""
        try:
            action = ActionText(self.spec.actions).parse(text)
        except ValueError as e:
            shown = text if len(text) <= 200 else text[:200] + "…"
            return self.act(None, f"{shown!r} is not an action: {e}"[:REPLY_CHARS])
        return self.act(action)

    def prompt(self) -> str:
        """What the player is shown now: the turn's prompt, or how the episode ended."""
        if self.done:
            return self.ending()
        turn = Turn(self.tracker.turns + 1, self.tracker.max_steps, self.observation, self.feedback,
                    self.tracker.recent(HISTORY))
        return agent_turn(turn)["prompt"]

    def ending(self) -> str:
        t = self.tracker
        return render("agents/episode_end.j2", observation="" if self.observation is None else self.observation,
                      reason=t.stop_reason or "agent_stopped", detail=str(t.stop_detail or "")[:500],
                      total=f"{t.total:g}", steps=t.turns).strip()

    def record(self, agent: str, model: str = "", run: int = 0, env: str | None = None) -> EpisodeRecord:
        """The episode's record, as evaluate writes one (`env`: the environment's name, default its
        folder's); an episode still going counts as stopped by its player (agent_stopped), as
        verifiers' rollouts count one their own limit ended."""
        if not self.done:
            self.tracker.stop("agent_stopped", "the player stopped before the episode ended")
        split = next((s for s, folder in layout.LEVEL_SPLITS.items() if str(self.level).startswith(f"{folder}/")), "")
        return self.tracker.record(env=env or self.spec.name, level=str(self.level), run=run, agent=agent, model=model,
                                   split=split, tags=self.spec.tags)

    def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            client.close()
