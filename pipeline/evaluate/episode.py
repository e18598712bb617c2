"""One episode: envforge's one episode engine — the agent loop, its limits and stop reasons (as
data), and its metrics. Every episode envforge plays goes through `run_episode`: evaluate's and
learn's agents, the Inspect adapter, verify's execution and reliability episodes and check's
(these through its synchronous face, `run_episode_sync`, on a worker they hold).

    reset -> while no stop reason: agent.act(turn) -> step the env (or count the error) -> check limits

A turn is one agent decision. It either sends an action to the environment (valid or invalid),
or sends none: a format error (a reply that is not an action of the declared space), a model
error, a budget stop, or the agent stopping on its own. Every turn counts towards the step
limit, as in EPOCH-Bench: an agent that answers garbage uses up its episode.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from envforge.pipeline.envfolder.actions import ActionSpace
from envforge.pipeline.envfolder.level import Level
from envforge.pipeline.kinds import EpisodeRecord, TrajectoryLine, TurnLine
from envforge.pipeline.sandbox import SandboxFailure
from envforge.pipeline.sandbox.outside.client import Observation, StepResult

# Why an episode ended. The keys are what records and reports say.
STOP_REASONS = {
    "solved": "reached the level's certified max reward",
    "env_ended": "the environment ended the episode below the max reward",
    "max_steps": "used every step",
    "invalid_action_streak": "too many invalid actions in a row",
    "loop_detected": "came back to the same state too often",
    "stagnation": "too many steps without a new state or any reward",
    "format_error_streak": "too many replies in a row that were not an action",
    "model_error": "a model call failed after its retries",
    "budget": "a budget cap stopped the model calls",
    "agent_stopped": "the agent stopped before the episode ended",
    "agent_error": "the agent's own code raised",
    "env_error": "the environment failed in the sandbox",
    "invalid_reward": "the environment's rewards were not finite numbers (a reward, or their running total)",
    "wall_clock": "the episode ran past its wall-clock limit",
}
# Ends that say nothing about the agent: left out of scores, and run again on resume
# (except the environment's faults, env_error and invalid_reward, which would end the same way again).
INFRASTRUCTURE = ("model_error", "budget", "env_error", "invalid_reward", "wall_clock")
ENV_FAULTS = ("env_error", "invalid_reward")
RERUN_ON_RESUME = ("model_error", "budget")


@dataclass(frozen=True)
class Limits:
    """When an episode stops early; 0 turns a limit off."""

    max_steps: int = 0  # turns; 0: the environment's termination.max_steps
    invalid_action_streak: int = 10
    format_error_streak: int = 5
    loop_visits: int = 10  # the same state this many times
    stagnation_steps: int = 20  # steps in a row with no new state and no reward
    episode_seconds: float = 900.0  # wall clock of one episode, model calls included


# Checked in this order after every turn that did not end the episode otherwise.
STREAK_RULES: tuple[tuple[str, Callable[["Tracker", Limits], bool]], ...] = (
    ("format_error_streak", lambda t, lim: 0 < lim.format_error_streak <= t.validity.format_streak),
    ("invalid_action_streak", lambda t, lim: 0 < lim.invalid_action_streak <= t.validity.invalid_streak),
    ("loop_detected", lambda t, lim: 0 < lim.loop_visits <= t.last_visits),
    ("stagnation", lambda t, lim: 0 < lim.stagnation_steps <= t.stagnant),
)


SPEND = ("tokens_in", "tokens_out", "dollars", "calls", "retries")  # what a turn's model calls cost


@dataclass
class Decision:
    """What an agent did on its turn: an action, or `error` ("format", "model", "budget",
    "stop") with a message, plus what the turn cost (its SPEND fields)."""

    action: dict | None = None
    error: str | None = None
    message: str = ""
    budget_scope: str = ""  # error "budget": the scope of the cap that refused the call ("run": every episode's)
    thought: str = ""
    reply: str | None = None  # the model's raw output, when there is one
    prompt: str | None = None  # the turn's user prompt, when there is one
    tokens_in: int = 0
    tokens_out: int = 0
    dollars: float = 0.0
    calls: int = 0
    retries: int = 0


@dataclass
class Turn:
    """What an agent sees on its turn."""

    step: int  # 1-based
    max_steps: int
    observation: Any
    last_action_result: Any  # the environment's feedback on the previous action, if any
    history: list[dict]  # recent turns, oldest first (see Tracker.recent)


@dataclass
class Validity:
    """How an episode's turns came out as actions: valid and invalid actions sent, format errors
    (turns with no action), the current streak of each kind of error, and the runs of consecutive
    errors, with how many of them a valid action ended."""

    valid: int = 0
    invalid: int = 0
    format_errors: int = 0
    format_streak: int = 0
    invalid_streak: int = 0
    error_streaks: int = 0  # runs of consecutive errors (format or invalid)
    recovered: int = 0  # ... followed by a valid action
    in_error: bool = False

    def format_error(self) -> None:
        self.format_errors += 1
        self.format_streak += 1
        self._error()

    def sent(self, invalid: bool) -> None:
        """An action the environment stepped, valid or not (it ends a streak of format errors)."""
        self.format_streak = 0
        if invalid:
            self.invalid += 1
            self.invalid_streak += 1
            self._error()
        else:
            self.valid += 1
            self.invalid_streak = 0
            if self.in_error:
                self.recovered += 1
                self.in_error = False

    def _error(self) -> None:
        if not self.in_error:
            self.error_streaks += 1
            self.in_error = True

    def figures(self, turns: int) -> dict[str, Any]:
        """Its fields of the episode's record (EpisodeRecord), over `turns` turns."""
        return {"valid_actions": self.valid, "invalid_actions": self.invalid, "format_errors": self.format_errors,
                "action_validity_rate": _rate(turns - self.format_errors, turns),
                "invalid_action_rate": _rate(self.invalid, self.valid + self.invalid),
                "error_streaks": self.error_streaks, "recovered_streaks": self.recovered,
                "recovery_rate": _rate(self.recovered, self.error_streaks)}


@dataclass
class Tracker:
    """Counts one episode's turns and decides when it stops."""

    limits: Limits
    max_steps: int
    max_reward: float | None
    space: ActionSpace = field(default_factory=ActionSpace)
    max_note: str = ""  # what the normalized score must say about the max (EnvSpec.max_note)
    turns: int = 0
    env_steps: int = 0
    total: float = 0.0
    validity: Validity = field(default_factory=Validity)
    visits: Counter = field(default_factory=Counter)
    last_visits: int = 0
    stagnant: int = 0
    spent: Counter = field(default_factory=lambda: Counter(dict.fromkeys(SPEND, 0) | {"dollars": 0.0}))
    events: Counter = field(default_factory=Counter)
    turn_log: list[dict] = field(default_factory=list)
    stop_reason: str | None = None
    stop_detail: str = ""
    budget_scope: str = ""  # stopped by a budget cap: that cap's scope (Decision.budget_scope)
    terminated: bool = False  # the environment reached an end state
    truncated: bool = False  # the runtime's step cap ended the episode
    started: float = field(default_factory=time.monotonic)

    def start(self, first: Observation) -> None:
        self.visits[first.state_hash] += 1

    def decided(self, decision: Decision) -> None:
        """Count a turn and its cost; a turn with no action ends here."""
        self.turns += 1
        self.spent.update({key: getattr(decision, key) for key in SPEND})
        if decision.action is not None:
            return
        entry = {"step": self.turns, "action": None, "error": decision.message or decision.error,
                 "result": None, "reward": 0.0}
        self.turn_log.append(entry)
        if decision.error == "format":
            self.validity.format_error()
            self._check()
        else:
            stopped = "solved" if self._solved() else "agent_stopped"  # e.g. the planner at the certified max
            reason = {"model": "model_error", "budget": "budget", "stop": stopped}.get(decision.error, "agent_error")
            if reason == "budget" and self.stop_reason is None:
                self.budget_scope = decision.budget_scope
            self.stop(reason, decision.message)

    def stepped(self, action: dict, out: StepResult) -> None:
        """Count what the environment made of an action."""
        self.env_steps += 1
        reward = out.reward
        if not math.isfinite(self.total + reward):
            # Each reward is finite (the sandbox client checks it), but ±1.7e308 twice is ±inf: the
            # total stays the last finite one and the episode ends as the environment's fault.
            self.turn_log.append({"step": self.turns, "action": action, "result": out.last_action_result,
                                  "reward": reward, "invalid": None, "events": out.events})
            self.stop("invalid_reward", f"the total reward is not a finite number after environment step "
                                        f"{self.env_steps}: {self.total:g} + {reward:g}")
            return
        self.total += reward
        events = out.events
        self.events.update(events)
        why = self.space.sent_invalid(action, events)
        self.validity.sent(invalid=bool(why))
        # An invalid action leaves the state as it was: that is the invalid streak's business,
        # so only valid actions count as coming back to a state.
        key = out.state_hash
        new_state = key not in self.visits
        if not why:
            self.visits[key] += 1
            self.last_visits = self.visits[key]
        self.stagnant = 0 if (new_state or reward != 0) else self.stagnant + 1
        self.turn_log.append({"step": self.turns, "action": action, "result": out.last_action_result,
                              "reward": reward, "invalid": why, "events": events})
        self.terminated, self.truncated = out.terminated, out.truncated
        if out.done:
            self.stop(self._end_reason(out))
        else:
            self._check()

    def _solved(self) -> bool:
        return self.max_reward is not None and self.max_reward > 0 and self.total >= self.max_reward - 1e-9

    def _end_reason(self, out: StepResult) -> str:
        if self._solved():
            return "solved"
        return "env_ended" if out.terminated else "max_steps"

    def _check(self) -> None:
        elapsed = time.monotonic() - self.started
        if 0 < self.limits.episode_seconds <= elapsed:
            return self.stop("wall_clock", f"after {elapsed:.0f}s (limit {self.limits.episode_seconds:g}s)")
        for reason, broken in STREAK_RULES:
            if broken(self, self.limits):
                return self.stop(reason)
        if self.turns >= self.max_steps:
            self.truncated = True
            self.stop("max_steps")

    def stop(self, reason: str, detail: str = "") -> None:
        if self.stop_reason is None:
            self.stop_reason, self.stop_detail = reason, detail

    def recent(self, n: int) -> list[dict]:
        return self.turn_log[-n:] if n > 0 else []

    def record(self, **identity: Any) -> EpisodeRecord:
        return EpisodeRecord.scored(
            **identity,
            total_reward=self.total,
            max_reward=self.max_reward,
            max_note=self.max_note,
            unscored=STOP_REASONS["invalid_reward"] if self.stop_reason == "invalid_reward" else "",
            stop_reason=self.stop_reason or "agent_stopped",
            stop_detail=self.stop_detail,
            terminated=self.terminated,
            truncated=self.truncated,
            steps=self.turns,
            env_steps=self.env_steps,
            **self.validity.figures(self.turns),
            distinct_states=len(self.visits),
            model_calls=self.spent["calls"],
            retries=self.spent["retries"],
            tokens_in=self.spent["tokens_in"],
            tokens_out=self.spent["tokens_out"],
            dollars=round(self.spent["dollars"], 6),
            wall_seconds=round(time.monotonic() - self.started, 3),
            events=dict(self.events),
        )


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def env_fault(failure: SandboxFailure) -> str:
    """The stop reason of an episode its environment failed: invalid_reward for a reward that is
    not a finite number (the same end as a running total that overflows), else env_error."""
    return "invalid_reward" if failure.kind == "invalid_reward" else "env_error"


class EpisodeSession(Protocol):
    """What the loop needs from a sandbox worker (WorkerSession in pipeline.evaluate.context)."""

    async def reset(self, level: Level) -> Observation: ...

    async def step(self, action: dict) -> StepResult: ...


async def run_episode(agent, session: EpisodeSession, level: Level, tracker: Tracker, history: int = 10,
                      log: Callable[[TrajectoryLine], None] = lambda line: None) -> Tracker:
    """Run one episode of `agent` on `level`; the tracker holds its outcome."""
    try:
        first = await session.reset(level)
    except SandboxFailure as f:
        tracker.stop(env_fault(f), str(f))
        return tracker
    tracker.start(first)
    observation, feedback = first.observation, None
    while tracker.stop_reason is None:
        turn = Turn(tracker.turns + 1, tracker.max_steps, observation, feedback, tracker.recent(history))
        decision = await agent.act(turn)
        tracker.decided(decision)
        out: StepResult | None = None
        if decision.action is not None:
            try:
                out = await session.step(decision.action)
            except SandboxFailure as f:
                tracker.stop(env_fault(f), str(f))
                break
            tracker.stepped(decision.action, out)
            observation, feedback = out.observation, out.last_action_result
        log(trajectory_line(turn, decision, out, tracker))
    return tracker


# What envforge keeps of each long text of an episode (an observation, a prompt, a reply): an env
# with 8 MB observations logged 801 MB for one episode. One cap, two forms: a trajectory line
# keeps the first TRAJECTORY_TEXT_CHARS characters and says how much it cut (capped); an episode
# kept to compare with another keeps the size and digest instead (kept), which still tells two
# runs apart.
TRAJECTORY_TEXT_CHARS = 20_000
KEEP_OBSERVATION_CHARS = TRAJECTORY_TEXT_CHARS


def capped(value: Any, limit: int = TRAJECTORY_TEXT_CHARS, cut: str = "not logged") -> Any:
    """`value`, or its first `limit` characters and a note of the cut (`play` shows what it prints
    the same way: an env's 100 MB observation is no text for a terminal)."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if len(text) <= limit:
        return value
    return text[:limit] + f"… [cut: {len(text) - limit} of {len(text)} characters {cut}]"


def trajectory_line(turn: Turn, decision: Decision, out: StepResult | None, tracker: Tracker) -> TurnLine:
    """One line of the episode's JSONL trajectory; long texts capped (see capped)."""
    line = TurnLine(turn.step, capped(turn.observation), capped(turn.last_action_result), capped(decision.prompt),
                    capped(decision.reply), capped(decision.thought), decision.action, decision.error,
                    decision.message, decision.tokens_in, decision.tokens_out, decision.dollars, tracker.total,
                    tracker.stop_reason)
    if out:  # a StepResult; None (or {}) when the turn sent no action
        line = dataclasses.replace(line, reward=out.reward, done=out.done, terminated=out.terminated,
                                   truncated=out.truncated, events=out.events, result=capped(out.last_action_result),
                                   invalid=tracker.turn_log[-1].get("invalid"), t=out.t, state_hash=out.state_hash)
    return line


def kept(observation: Any) -> Any:
    """`observation`, or past KEEP_OBSERVATION_CHARS a note of its size and digest that says so."""
    text = observation if isinstance(observation, str) else json.dumps(observation, sort_keys=True)
    if len(text) <= KEEP_OBSERVATION_CHARS:
        return observation
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]
    return f"<observation of {len(text)} characters, cut: not kept; sha256 {digest}>"


# -- the synchronous face ------------------------------------------------------------------------
@dataclass
class Episode:
    """What a synchronous episode saw, step by step (observations as `kept` keeps them)."""

    level: Any
    total_reward: float = 0.0
    steps: int = 0
    terminated: bool = False  # the environment reached an end state
    truncated: bool = False  # the runtime's step cap (or the caller's limit) ended it
    # done() itself ended it at the cap (`t >= max_steps` in the env's own done()): truncated all the
    # same, but no sign of an env whose episodes never end
    ended_at_cap: bool = False
    observations: list = field(default_factory=list)
    actions: list = field(default_factory=list)
    rewards: list = field(default_factory=list)
    events: list = field(default_factory=list)
    tracker: Tracker | None = None


class _Held:
    """A worker the caller holds (EnvClient), seen as the engine's EpisodeSession: its calls are made
    directly and never suspend; it records the episode's steps and lets a SandboxFailure through
    to the caller (whose verdict it is), after the engine has ended the episode on it."""

    def __init__(self, env, seed: int, want_state: bool, on_step: Callable[[dict, StepResult], None] | None):
        self.env, self.seed, self.want_state, self.on_step = env, seed, want_state, on_step
        self.failure: SandboxFailure | None = None
        self.last: StepResult | None = None
        self.episode: Episode | None = None

    async def reset(self, level) -> Observation:
        first = self._call(self.env.reset, level, self.seed, want_state=self.want_state)
        self.episode = Episode(level, observations=[kept(first.observation)])
        return first

    async def step(self, action: dict) -> StepResult:
        out = self._call(self.env.step, action, want_state=self.want_state)
        episode, self.last = self.episode, out
        episode.steps += 1
        episode.total_reward += out.reward
        episode.actions.append(action)
        episode.rewards.append(out.reward)
        episode.events.append(out.events)
        episode.observations.append(kept(out.observation))
        if self.on_step:
            self.on_step(action, out)
        return out

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SandboxFailure as f:
            self.failure = f
            raise


# The limits of an episode played to learn about the environment, not to score an agent: no
# streak, loop or stagnation stop, no wall clock of its own (the worker's deadline holds).
PROBING = Limits(0, 0, 0, 0, 0, 0.0)


def run_episode_sync(agent, env, level, seed: int = 0, limit: int | None = None,
                     on_step: Callable[[dict, StepResult], None] | None = None, want_state: bool = False) -> Episode:
    """One episode of `agent` on `level` in the worker `env` (an EnvClient the caller holds),
    through the engine, synchronously: the agent must answer without waiting on anything (random,
    a fixed action sequence). `seed`: the RNG seed of a level file. `limit`: stop after that many
    steps even before the cap (counted as truncated). A wall-clock budget is the client's
    (`EnvClient.deadline`): past it the episode ends as a `wall_clock` failure. `on_step(action,
    result)` after each step; `want_state`: each result carries the true state. A SandboxFailure
    is raised to the caller."""
    session = _Held(env, seed, want_state, on_step)
    tracker = Tracker(dataclasses.replace(PROBING, max_steps=limit or 0), limit or env.max_steps, None,
                      getattr(agent, "space", None) or ActionSpace())
    _run_now(run_episode(agent, session, level, tracker))
    if session.failure is not None:
        raise session.failure
    episode, last = session.episode, session.last
    episode.tracker = tracker
    if last is not None:
        episode.terminated, episode.truncated = last.terminated, not last.terminated
        episode.ended_at_cap = last.capped
    return episode


def _run_now(coroutine):
    """Run a coroutine that never waits (its agent and session answer at once) to its end, here."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("a synchronous episode waited on something: its agent must answer without waiting")
