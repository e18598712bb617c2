"""The one typed client over a sandbox worker: every host-side use of an environment goes here.

    with EnvClient.open(EnvSpec.open("generated_envs/reference/crate_dock")) as env:
        first = env.reset(Level.parse("levels/level_01.yaml"))
        result = env.step({"action": "move", "params": {"direction": "north"}})
        result.reward, result.terminated, result.truncated

The protocol's operation names are pipeline/sandbox/protocol.py's (ENV_OPS, AGENT_OPS): this
client calls them, the worker's hosts (inside/host.py, inside/agent_host.py) answer them. Every
reply is checked here (replies.py) before anyone reads it.

The step cap is the runtime's: the client counts the steps since `reset` against `max_steps`,
the spec's (config.yaml read on the host, never the environment's code or a reply), or fewer
when its caller asks. A step reports `terminated` (the environment reached an end state) apart from
`truncated` (the cap was reached first), as Gymnasium does.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from envforge.pipeline.envfolder.level import Level
from envforge.pipeline.sandbox.limits import SandboxLimits
from envforge.pipeline.sandbox.outside import replies
from envforge.pipeline.sandbox.outside.executor import open_worker
from envforge.pipeline.sandbox.outside.failures import SandboxFailure
from envforge.pipeline.sandbox.outside.process import OnRequest, Worker
from envforge.pipeline.sandbox.outside.replies import JSON, NUMBER, OPTIONAL

if TYPE_CHECKING:
    from envforge.pipeline.envfolder.spec import EnvSpec

# Wall-clock slack on top of a search's own time budget before the worker call times out.
SEARCH_MARGIN_SECONDS = 15.0
# A search's wall-clock safety stop unless its caller sets one: its budget is in nodes.
SEARCH_SAFETY_SECONDS = 600.0


@dataclass
class Observation:
    """What `reset` and `observe` give: the text the agent reads and, with want_state, the data."""

    observation: Any  # what the agent reads (the env's render_skin: usually text)
    state_hash: str
    t: int | None = None  # the environment's own step counter, for display only
    state: Any = None  # the true state (want_state), as plain JSON (integer keys become strings)
    raw_obs: Any = None  # the structured observation omega (want_state or want_obs)
    level_text: str | None = None  # a generated level's YAML as the worker wrote it, types intact (want_state)


@dataclass
class StepResult(Observation):
    reward: float = 0.0
    events: list[str] = field(default_factory=list)
    last_action_result: Any = None
    terminated: bool = False  # the environment reached an end state
    truncated: bool = False  # the runtime's step cap was reached first
    capped: bool = False  # done() said the episode ends, by its own copy of the step cap (still a truncation)
    rng_drawn: bool = False  # the step drew random numbers (asked with check_rng)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


@dataclass
class Verdict:
    """The environment's validator on one level."""

    ok: bool
    issues: list[str]
    max_reward: float | None
    state_hash: str
    warnings: list[str] = field(default_factory=list)


def warning_only(issue: str) -> bool:
    """Whether a validator's issue line is only a warning ("WARNING: ...", "Warning - ...")."""
    return issue.lstrip().upper().startswith("WARNING")


@dataclass
class SearchResult:
    best_reward: float
    witness: list[dict] = field(default_factory=list)
    nodes: int = 0
    exhausted: bool = False  # the whole reachable space within max_steps was searched
    distinct_states: int = 0
    seconds: float = 0.0
    time_in_key: bool = True  # states at different steps were kept apart (see pipeline/sandbox/inside/search.py)
    # The budget that ended it: "nodes", "memory", "bound" (stop_at met), "upper_bound" (the DSL's
    # reward bound met: nothing does better), "bound_refuted" (a step broke the bound after it had
    # pruned: not exhausted) or "seconds" (the wall-clock safety stop: load-dependent).
    stopped: str | None = None
    proof: str | None = None  # why best_reward is the max: "exhausted" or "upper_bound"; None: a lower bound
    bound_refuted: str | None = None  # how a step broke the DSL's reward bound, which was then not used
    order: str = "breadth"
    pruned: int = 0  # branches the DSL's reward bound showed could not beat the best (branch and bound)
    # The DSL's bound on the total from the search's start (planner.reward_bound), when no step broke it.
    upper_bound: float | None = None
    # What the steps taken showed (a hypothesis, never a proof): the largest step reward, whether
    # every paying step ended the episode, how many steps ({"step_max", "paying_steps_end", "steps"}).
    evidence: dict | None = None
    # Difficulty evidence (pipeline/difficulty.py): the nodes stepped when the best was last raised and
    # when it first met stop_at (None: never); the depth of the last node expanded (in breadth order
    # every shorter path was stepped); states expanded and their distinct successor states in all.
    best_at: int = 0
    target_at: int | None = None
    target_depth: int | None = None  # the steps from the start of the path that first met stop_at
    depth_reached: int = 0
    expanded: int = 0
    successors: int = 0
    dives: int = 0  # beam dives run beside best-first (pipeline/sandbox/inside/search.py) ...
    dive_nodes: int = 0  # ... and the nodes of the budget they stepped

    @property
    def cut_by_clock(self) -> bool:
        """Whether the wall-clock safety stop ended it (its figures depend on machine load)."""
        return self.stopped == "seconds"


def _count(reply: dict, key: str) -> int | None:
    """A search's count field, checked (the worker is untrusted): a whole number >= 0; None when absent
    (`target_at`: the target was never met; an older worker's reply for the rest, counted 0)."""
    value = reply.get(key)
    if value is None:
        return None if key.startswith("target_") else 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SandboxFailure("protocol", f"reply to 'search': {key}: expected a count >= 0, found {str(value)[:80]}",
                             op="search")
    return value


def _evidence(value: Any) -> dict | None:
    """A search's `evidence` field, checked (the worker is untrusted); None when absent."""
    if value is None:
        return None
    step_max = replies.reward(value.get("step_max"), "search", "evidence.step_max")
    ends, steps = value.get("paying_steps_end"), value.get("steps")
    if not isinstance(ends, bool) or not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise SandboxFailure("protocol", f"reply to 'search': evidence: expected paying_steps_end (true or false) "
                                         f"and steps (a count), found {str(value)[:200]}", op="search")
    return {"step_max": step_max, "paying_steps_end": ends, "steps": steps}


_OBSERVATION = {"observation": JSON, "state_hash": str, "t": (int, OPTIONAL), "state": JSON, "raw_obs": JSON,
                "level_text": (str, OPTIONAL)}
_STEP = {**_OBSERVATION, "reward": JSON, "terminated": bool, "capped": (bool, OPTIONAL), "events": list,
         "last_action_result": JSON, "rng_drawn": (bool, OPTIONAL)}
_SEARCH = {"best_reward": JSON, "witness": list, "nodes": int, "exhausted": bool, "distinct_states": int,
           "seconds": NUMBER, "stopped": (str, OPTIONAL), "proof": (str, OPTIONAL), "bound_refuted": (str, OPTIONAL),
           "pruned": (int, OPTIONAL), "upper_bound": (*NUMBER, OPTIONAL),
           "evidence": (dict, OPTIONAL), "best_at": (int, OPTIONAL), "target_at": (int, OPTIONAL),
           "target_depth": (int, OPTIONAL), "depth_reached": (int, OPTIONAL),
           "expanded": (int, OPTIONAL), "successors": (int, OPTIONAL), "dives": (int, OPTIONAL),
           "dive_nodes": (int, OPTIONAL)}
_VERDICT = {"ok": bool, "issues": list, "max_reward": JSON, "state_hash": str, "warnings": (list, OPTIONAL)}


class EnvClient:
    """A loaded environment in a sandbox worker, seen through typed calls.

    `max_steps`: the episode's step cap, from config.yaml (pipeline.envfolder's rule).
    `deadline`: (time.monotonic() value, what set it) of the command's wall-clock budget; past
    it every call is refused as a `wall_clock` failure, so an environment that answers each call
    just inside the call's limit still cannot stretch a run without end.
    """

    def __init__(self, worker: Worker, max_steps: int, deadline: tuple[float, str] | None = None):
        self.worker = worker
        self.max_steps = int(max_steps)
        self.deadline = deadline
        self.steps = 0  # steps since the last reset: what the cap counts
        self._steps_at: dict[int, int] = {}  # snapshot handle -> steps when it was taken
        self.class_name: str = _loaded(worker, {"class": str, "skin": (str, OPTIONAL)})["class"]

    @classmethod
    def start(cls, spec: "EnvSpec", limits: SandboxLimits | None = None, skin: str | None = None,
              deadline: tuple[float, str] | None = None, max_steps: int | None = None) -> "EnvClient":
        """A fresh worker holding the environment of `spec` (here, or on a Ray node: see executor.py),
        capped at the spec's max_steps, or at `max_steps` when the caller asks for fewer; the caller
        closes it."""
        return cls.start_folder(spec.path, spec.max_steps if max_steps is None else max_steps, limits, skin, deadline)

    @classmethod
    def start_folder(cls, env_dir: str | Path, max_steps: int, limits: SandboxLimits | None = None,
                     skin: str | None = None, deadline: tuple[float, str] | None = None) -> "EnvClient":
        """A fresh worker holding a folder that may not read as an EnvSpec (a rejected theme's, whose
        levels review only resets): its cap is the caller's."""
        worker = open_worker(env_dir, limits, skin=skin)
        try:
            return cls(worker, max_steps, deadline)
        except BaseException:
            worker.close()
            raise

    @classmethod
    @contextlib.contextmanager
    def open(cls, spec: "EnvSpec", limits: SandboxLimits | None = None, skin: str | None = None,
             deadline: tuple[float, str] | None = None, max_steps: int | None = None) -> Iterator["EnvClient"]:
        """`start`, closed afterwards."""
        env = cls.start(spec, limits, skin, deadline, max_steps)
        try:
            yield env
        finally:
            env.close()

    @property
    def env_dir(self) -> Path:
        return self.worker.env_dir

    def close(self) -> None:
        self.worker.close()

    # -- episodes ------------------------------------------------------------------------
    def reset(self, level: Level | str, seed: int | None = 0, want_state: bool = False,
              want_obs: bool = False) -> Observation:
        """Start an episode on `level`. `seed` seeds the environment's random numbers for a level
        file; a generated level uses its own seed for both. `want_state`: the result carries the
        true state and the structured observation; `want_obs`: the structured observation only."""
        more = {"want_obs": True} if want_obs else {}
        level = Level.parse(level)
        if level.generated:  # the env's generator runs: its own safety stop, not the call limit
            reply = self._generator_call("reset", _OBSERVATION, f"generate_level for seed {level.seed}",
                                         want_state=want_state, max_steps=self.max_steps, generate=True,
                                         seed=level.seed, **more)
        else:
            reply = self._call("reset", _OBSERVATION, want_state=want_state, max_steps=self.max_steps,
                               level=level.file, seed=seed, **more)
        self.steps = 0
        return _observation(reply)

    def observe(self, want_state: bool = False, want_obs: bool = False) -> Observation:
        return _observation(self._call("observe", _OBSERVATION, want_state=want_state,
                                       **({"want_obs": True} if want_obs else {})))

    def step(self, action: dict, want_state: bool = False, check_rng: bool = False,
             want_obs: bool = False) -> StepResult:
        """One step; with `check_rng`, the result says whether it drew random numbers; `want_state`
        and `want_obs` as for `reset`."""
        reply = self._call(
            "step", _STEP, action=action, want_state=want_state, **({"check_rng": True} if check_rng else {}),
            **({"want_obs": True} if want_obs else {}))
        self.steps += 1
        terminated = reply["terminated"]
        try:
            reward = replies.reward(reply["reward"], "step")
        except SandboxFailure:
            self.worker.failed = True  # its own reward check did not hold: not reused
            raise
        return StepResult(
            **vars(_observation(reply)), reward=reward,
            events=[str(e) for e in reply["events"]], last_action_result=reply.get("last_action_result"),
            terminated=terminated, truncated=not terminated and self.steps >= self.max_steps,
            capped=bool(reply.get("capped")), rng_drawn=bool(reply.get("rng_drawn")))

    # -- snapshots -----------------------------------------------------------------------
    def snapshot(self) -> int:
        """A handle to the current state (the worker holds it)."""
        handle = self._call("snapshot", {"handle": int, "state_hash": str})["handle"]
        self._steps_at[handle] = self.steps
        return handle

    def restore(self, handle: int, reseed: int | None = None) -> str:
        """Back to a snapshot; with `reseed`, its random numbers continue along another path.
        Returns the state's hash."""
        reply = self._call("restore", {"state_hash": str}, handle=handle, reseed=reseed)
        self.steps = self._steps_at.get(handle, self.steps)
        return reply["state_hash"]

    def drop(self, handles: list[int] | None = None) -> int:
        """Forget snapshots (all of them by default); returns how many are still held."""
        for handle in (list(self._steps_at) if handles is None else handles):
            self._steps_at.pop(handle, None)
        return self._call("drop", {"held": int}, handles=handles)["held"]

    # -- the worker's own work -------------------------------------------------------------
    def search(self, actions: list[dict], max_steps: int | None = None, max_nodes: int = 50_000,
               seconds: float = SEARCH_SAFETY_SECONDS, time_in_key: bool = True, stop_at: float | None = None,
               order: str = "breadth", bound: dict | None = None, goals: list | None = None,
               floor: float | None = None) -> SearchResult:
        """Search from the current state (pipeline/sandbox/inside/search.py) within `max_steps` of the
        episode (default: the cap), `max_nodes` steps of the environment; `seconds` is only the
        safety stop (a result it cut says so: `cut_by_clock`)."""
        reply = self._call("search", _SEARCH, timeout=seconds + SEARCH_MARGIN_SECONDS, actions=actions,
                           max_steps=min(max_steps or self.max_steps, self.max_steps), max_nodes=max_nodes,
                           seconds=seconds, time_in_key=time_in_key, stop_at=stop_at, order=order, bound=bound,
                           goals=goals, floor=floor)
        if not all(isinstance(a, dict) for a in reply["witness"]):
            raise SandboxFailure("protocol", "reply to 'search': witness: expected a list of actions", op="search")
        return SearchResult(replies.reward(reply["best_reward"], "search", "best_reward"), reply["witness"],
                            reply["nodes"], reply["exhausted"], reply["distinct_states"], float(reply["seconds"]),
                            time_in_key, reply.get("stopped"), reply.get("proof"), reply.get("bound_refuted"), order,
                            reply.get("pruned") or 0, None if reply.get("upper_bound") is None else
                            replies.reward(reply["upper_bound"], "search", "upper_bound"),
                            _evidence(reply.get("evidence")), *(_count(reply, k) for k in (
                                "best_at", "target_at", "target_depth", "depth_reached", "expanded", "successors",
                                "dives", "dive_nodes")))

    def validate(self, level: Level | str | None = None, state: Any = None) -> Verdict:
        """The environment's validator on a level file, a given state, or the current state."""
        args = {"level": Level.parse(level).file} if level is not None else {"state": state}
        if level is not None and args["level"] is None:
            raise ValueError("validate takes a level file or a state; a seed's level is validated by its state")
        reply = self._generator_call("validate", _VERDICT, f"the validator on {level or 'the current level'}", **args)
        bound = reply["max_reward"]
        ok, issues, warnings = (
            reply["ok"],
            [str(i) for i in reply["issues"]],
            [str(w) for w in reply.get("warnings") or []],
        )
        if not ok and issues and all(warning_only(i) for i in issues):
            # A validator that fails a level on its own "WARNING: ..." lines alone accepts it with warnings.
            ok, issues, warnings = True, [], issues + warnings
        return Verdict(ok, issues, None if bound is None else replies.reward(bound, "validate", "max_reward"),
                       reply["state_hash"], warnings)

    def call_function(self, module: str, function: str, args: list | None = None) -> Any:
        """Call `function` of one of the environment's own modules (e.g. a variant selector)."""
        return self._call("call", {}, module=module, function=function, args=args or [])

    def ping(self) -> bool:
        return self._call("ping", {"pong": bool})["pong"]

    def _generator_call(self, op: str, fields: dict, what: str, **args: Any) -> Any:
        """A call of the env's generator or validator: timed by limits.generator_seconds, a safety stop
        (they may search a level's whole space, which takes what machine load makes it take), not
        by call_seconds. A call it cuts is a "safety_stop" failure that says so."""
        seconds = self.worker.limits.generator_seconds
        try:
            return self._call(op, fields, timeout=seconds, **args)
        except SandboxFailure as failure:
            if failure.kind != "timeout":  # timeout: the host's limit, or the worker's own deadline just after it
                raise
            raise SandboxFailure("safety_stop", f"{what} ran past its wall-clock safety stop of {seconds:g}s "
                                 f"(generator_seconds, not the call limit: a verdict it decides depends on machine "
                                 f"load)", failure.where, failure.output, failure.op) from None

    def _call(self, op: str, fields: dict, timeout: float | None = None, **args: Any) -> Any:
        if self.deadline is not None and time.monotonic() > self.deadline[0]:
            raise SandboxFailure("wall_clock", f"stopped after {self.steps} steps: {self.deadline[1]}", op=op)
        result = self.worker.call(op, timeout=timeout, **args)
        try:
            return replies.shaped(result, op, fields) if fields else replies.plain(result, op)
        except SandboxFailure as failure:
            failure.output = self.worker.output_text()
            self.worker.failed = True  # a worker that lies is not reused
            raise


class AgentClient:
    """A learned agent's agent.py in a sandbox worker (host="agent", see agent_host.py)."""

    def __init__(self, worker: Worker):
        self.worker = worker
        _loaded(worker, {"class": str})

    def start(self, env: dict) -> str:
        """A fresh agent for one episode; returns its class name."""
        return replies.shaped(self.worker.call("start", env=env), "start", {"class": str})["class"]

    def act(self, turn: dict, on_request: OnRequest) -> Any:
        """The agent's answer to one turn (plain JSON; the caller reads the decision out of it)."""
        return replies.plain(self.worker.call("act", turn=turn, on_request=on_request), "act")


def _loaded(worker: Worker, fields: dict) -> dict:
    """The worker's reply to its load, checked; a worker that lied in it is not reused."""
    try:
        return replies.shaped(worker.info, "load", fields)
    except SandboxFailure:
        worker.failed = True
        raise


def _observation(reply: dict) -> Observation:
    return Observation(reply["observation"], reply["state_hash"], reply.get("t"), reply.get("state"),
                       reply.get("raw_obs"), reply.get("level_text"))
