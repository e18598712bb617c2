"""The best candidate of a run, exported so that `envforge evaluate --agent learned:PATH` runs it.

    PATH/learned.json   env, method, candidate id, lineage, train and test rewards, model
    PATH/prompt.txt     the learned instruction
    PATH/agent.py       the learned agent code (only for agent_code candidates; it runs in the sandbox)
"""
from __future__ import annotations

import shutil
from pathlib import Path

from envforge.learning.candidates import Pool
from envforge.pipeline import records as files
from envforge.pipeline.errors import UserError
from envforge.pipeline.evaluate import ModelOptions, make_player
from envforge.pipeline.evaluate.hosted import code_player
from envforge.pipeline.kinds import LearnedAgent
from envforge.pipeline.sandbox.protocol import AGENT_FILE

LEARNED_JSON, PROMPT_TXT = "learned.json", "prompt.txt"
LEARNED = "learned:"  # --agent learned:PATH (registered by pipeline/commands/evaluate.py)


def export(pool: Pool, folder: Path, model: str) -> Path:
    c = pool.get(pool.final)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    files.write_text(folder / PROMPT_TXT, c.components.prompt)
    if c.components.agent_code is not None:
        files.write_text(folder / AGENT_FILE, c.components.agent_code)
    test = c.evaluations.get("test")
    files.write(folder / LEARNED_JSON, LearnedAgent(
        pool.env, pool.method, c.id, pool.lineage(c.id), c.iteration, model, c.components.agent_code is not None,
        c.reward, test.metrics.reward if test else None), indent=1)
    return folder


def learned_player(path: str, client, options: ModelOptions):
    """A Player for `--agent learned:PATH` (PATH: the exported folder or its learned.json)."""
    folder = Path(path)
    folder = folder.parent if folder.name == LEARNED_JSON else folder
    if not (folder / LEARNED_JSON).is_file() or not (folder / PROMPT_TXT).is_file():
        raise UserError(f"--agent learned:{path}: expected a folder exported by envforge learn "
                        f"({LEARNED_JSON}, {PROMPT_TXT}), found none at {folder}")
    files.read(folder / LEARNED_JSON, LearnedAgent)  # refused when a newer envforge wrote it, or not its shape
    prompt = (folder / PROMPT_TXT).read_text(encoding="utf-8")
    if (folder / AGENT_FILE).is_file():
        return code_player(folder.resolve(), prompt, client, options)
    return make_player("react", client=client, model_options=options, instruction=prompt)
