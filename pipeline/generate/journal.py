"""The call journal: every model response of a theme, written to disk before it is used.

A stage asks the model through `JournaledClient.complete(stage, ...)`. The n-th call of a stage
is answered from the journal when the journal has it (the run was interrupted after it), else by
the client, and the answer is appended and flushed before the stage acts on it. So a run killed
at any instant resumes where it stopped and no model call is made twice.
"""
from __future__ import annotations

from pathlib import Path

from envforge.pipeline import records as files
from envforge.pipeline.kinds import ModelCall
from envforge.pipeline.llm.client import LLMClient
from envforge.pipeline.llm.messages import Response


class JournaledClient:
    def __init__(self, client: LLMClient, path: Path, theme: str, text: str = ""):
        self.client = client
        self.path = path
        self.theme = theme  # the theme's folder name: costs and budgets go by it
        self.text = text  # the whole theme: replay finds its recordings by it
        self._entries: dict[tuple[str, int], ModelCall] = {}
        self._next: dict[str, int] = {}
        self.served = 0  # calls answered from the journal: made by an earlier, interrupted run
        for _, entry in files.lines(path, ModelCall, repair=True):  # a line cut by a kill is set aside
            self._entries[(entry.stage, entry.index)] = entry

    def restart(self, stage: str) -> None:
        """Forget a stage's calls: the stage runs again from its first call (a retry)."""
        self._entries = {k: v for k, v in self._entries.items() if k[0] != stage}
        self._next.pop(stage, None)
        self._rewrite()

    async def complete(self, stage: str, messages, **kwargs) -> Response:
        index = self._next.get(stage, 0) + 1
        self._next[stage] = index
        entry = self._entries.get((stage, index))
        if entry is not None:
            self.served += 1
            return Response.from_dict(entry.response, source="journal")
        response = await self.client.complete(messages, theme=self.theme, stage=stage, index=index,
                                              subject=self.text, **kwargs)
        entry = ModelCall(stage, index, response.to_dict())
        self._entries[(stage, index)] = entry
        files.append(self.path, entry, durable=True)
        return response

    def _rewrite(self) -> None:
        files.write_text(self.path, "".join(files.dumps(e.KIND, e.to_dict(), indent=None) + "\n"
                                            for e in self._entries.values()))
