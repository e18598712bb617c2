"""Predict items: an observation, k actions, and 4-6 candidate next observations, exactly one true.

The state is reached by a random prefix from a level's start. Distractors are counterfactual
(WM-ABench): the observation after other actions from the same state (one action changed, or all),
and after the same actions from other previous states at the same step (another random prefix of
the same length; at step 0, another level's start). A candidate rendering exactly like the truth
is dropped, so one candidate is right (WorldTest's uniqueness condition). For stochastic dynamics
the truth is rendered `samples` times (`stochastic_samples` once the env showed itself stochastic)
from the same state with different RNG states; an item whose truth is not a single rendering is
dropped.
"""
from __future__ import annotations

from dataclasses import dataclass

from envforge.pipeline.probe.items import PredictItem, Start
from envforge.pipeline.probe.session import ProbeSession

SOURCES = ("counterfactual_action", "counterfactual_state")
RESEED_BASE = 7_919  # RNG seeds of the extra truth samples: RESEED_BASE + 1, + 2, ...


@dataclass(frozen=True)
class PredictOptions:
    max_k: int = 3  # k = 1..max_k, in turn
    choices: int = 5  # candidates per item (4-6); fewer distinct ones than 4 drop the item
    samples: int = 3  # renderings of the truth from different RNG states
    stochastic_samples: int = 32  # ... when the env turned out stochastic (an outcome rarer than
    #                               about 1 in this many may go unseen and be offered as a distractor)
    max_prefix: int = 8  # random steps from the level's start before the observation
    tries: int = 6  # counterfactuals drawn per source


def make_predict(session: ProbeSession, n: int, options: PredictOptions = PredictOptions()) -> list[PredictItem]:
    if not 4 <= options.choices <= 6:
        raise ValueError(f"choices: expected 4 to 6 candidates, found {options.choices}")
    items: list[PredictItem] = []
    attempts = 0
    while len(items) < n and attempts < 20 * n:
        attempts += 1
        item = _one(session, len(items), 1 + len(items) % options.max_k, options)
        if item is not None:
            items.append(item)
    return items


def _one(session: ProbeSession, number: int, k: int, o: PredictOptions) -> PredictItem | None:
    rng, worker = session.rng, session.worker
    start = Start(rng.choice(session.levels), 0, session.random_actions(rng.randint(0, o.max_prefix)))
    first = session.begin(start)
    if first is None:
        session.drop("the episode ended during the prefix")
        return None
    snapshot = worker.snapshot()
    try:
        actions = session.random_actions(k)
        truths = set()
        for sample in range(o.stochastic_samples if session.stochastic() else o.samples):
            worker.restore(snapshot, reseed=RESEED_BASE + sample if sample else None)
            replies = session.play(actions)
            if len(replies) < k:
                session.drop("the episode ended before the k-th action")
                return None
            truths.add(replies[-1].observation)
        if len(truths) > 1:
            session.drop("the truth is not one rendering (stochastic dynamics)")
            return None
        truth = truths.pop()
        pool = {source: [] for source in SOURCES}
        seen = {truth}

        def consider(source: str, replies: list[dict]) -> None:
            if len(replies) == k and replies[-1].observation not in seen:
                seen.add(replies[-1].observation)
                pool[source].append(replies[-1].observation)

        for attempt in range(o.tries):
            other = _other_actions(session, actions, whole=attempt % 2 == 1)
            if other != actions:
                worker.restore(snapshot)
                consider("counterfactual_action", session.play(other))
        for _ in range(o.tries):
            other_start = _other_start(session, start)
            if other_start is not None and session.begin(other_start) is not None:
                consider("counterfactual_state", session.play(actions))
    finally:
        worker.drop([snapshot])

    distractors = _interleave(pool, o.choices - 1)
    if len(distractors) < 3:
        session.drop("fewer than 3 distinct distractors")
        return None
    order = [("truth", truth)] + distractors
    rng.shuffle(order)
    return PredictItem(**session.item_fields("predict", number, start), observation=first.observation,
                       actions=actions, k=k, candidates=[text for _, text in order],
                       answer=[source for source, _ in order].index("truth"),
                       sources=[source for source, _ in order],
                       truth_samples=o.stochastic_samples if session.stochastic() else o.samples)


def _other_actions(session: ProbeSession, actions: list[dict], whole: bool) -> list[dict]:
    """Counterfactual actions: a new random sequence, or the same with one action replaced."""
    choices = session.spec.actions.candidates()
    if whole or len(choices) < 2:
        return session.random_actions(len(actions))
    position = session.rng.randrange(len(actions))
    others = [c for c in choices if c != actions[position]]
    return actions[:position] + [session.rng.choice(others)] + actions[position + 1:]


def _other_start(session: ProbeSession, start: Start) -> Start | None:
    """A counterfactual previous state at the same step: another prefix of the same length, or,
    at step 0, another level's start."""
    if start.prefix:
        other = Start(start.level, start.seed, session.random_actions(len(start.prefix)))
        return other if other.prefix != start.prefix else None
    levels = [level for level in session.levels if level != start.level]
    return Start(session.rng.choice(levels), start.seed, []) if levels else None


def _interleave(pool: dict[str, list[str]], count: int) -> list[tuple[str, str]]:
    """Up to `count` distractors taking the sources in turn, so both kinds are represented."""
    out: list[tuple[str, str]] = []
    queues = {source: list(texts) for source, texts in pool.items()}
    while len(out) < count and any(queues.values()):
        for source in SOURCES:
            if queues[source] and len(out) < count:
                out.append((source, queues[source].pop(0)))
    return out
