"""Record and replay: every call as one plain YAML file a person can read, write and edit.

Layout: DIR/<theme-slug>/<stage>/<NNN>.yaml, NNN = 001, 002, ... the order of the call within
that theme and stage, and DIR/<theme-slug>/theme.txt, the whole theme the recordings are of.
A call made for a theme is served from the folder whose theme.txt holds that very theme (a
theme sharing its first words with another is not served the other's recordings); a folder
without theme.txt (hand-written) is found by its name. Within it, replay matches on the
position alone; the `request` section of a file is a summary for people and is never compared.
The format is documented in docs/replay_format.md.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from envforge.pipeline import records as files
from envforge.pipeline import safe_io
from envforge.pipeline.llm.errors import ReplayInvalid, ReplayMissing
from envforge.pipeline.llm.messages import CallContext, Message, Request, Response, ToolCall, Usage
from envforge.pipeline.located import LocatedError

THEME_TEXT = "theme.txt"
SUMMARY_BYTES = 1_000_000  # a recording's `request` summary, read besides the reply's own cap
RECORDING_DEPTH = 4 + safe_io.MAX_DEPTH  # response: tool_calls: - arguments: as deep as a reply may send them
MAX_THEME_BYTES = 20_000
HEADER = ("# envforge recording. Replay uses only `response`; `request` summarises the call for\n"
          "# people (earlier turns are counted, the turns added since the last reply are shown).\n")


def slug(text: str, empty: str = "_") -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60].strip("-")
    if s:
        return s
    return f"x-{hashlib.sha1(text.encode()).hexdigest()[:8]}" if text else empty


def recording_path(root: Path, ctx: CallContext, index: int) -> Path:
    return root / slug(ctx.theme) / slug(ctx.stage) / f"{index:03d}.yaml"


class _Dumper(yaml.SafeDumper):
    pass


def _represent_str(dumper: yaml.SafeDumper, data: str) -> Any:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _represent_str)


def _message_summary(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role}
    if m.role == "tool":
        out["tool_call_id"] = m.tool_call_id
    if m.content:
        out["content"] = m.content
    if m.tool_calls:
        out["tool_calls"] = [{"name": c.name, "arguments": c.arguments} for c in m.tool_calls]
    return out


def request_summary(request: Request, ctx: CallContext, index: int, model: str) -> dict[str, Any]:
    last_reply = max((i for i, m in enumerate(request.messages) if m.role == "assistant"), default=-1)
    summary: dict[str, Any] = {
        "theme": ctx.theme, "stage": ctx.stage, "call": index, "model": model,
        "max_tokens": request.max_tokens,
    }
    if request.tools:
        summary["tools"] = [t.name for t in request.tools]
    if last_reply >= 0:
        summary["earlier_messages"] = last_reply + 1
    summary["messages"] = [_message_summary(m) for m in request.messages[last_reply + 1:]]
    return summary


def response_data(response: Response) -> dict[str, Any]:
    data: dict[str, Any] = {"text": response.text}
    if response.tool_calls:
        data["tool_calls"] = [c.to_dict() for c in response.tool_calls]
    data["stop_reason"] = response.stop_reason
    data["usage"] = {k: v for k, v in asdict(response.usage).items() if v}
    if response.model:
        data["model"] = response.model
    return data


class Recorder:
    """Writes each answered call to DIR/<theme>/<stage>/<NNN>.yaml."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def write(self, ctx: CallContext, index: int, request: Request, model: str, response: Response) -> Path:
        path = recording_path(self.root, ctx, index)
        theme = path.parent.parent / THEME_TEXT
        if ctx.subject and not theme.exists():
            files.write_text(theme, ctx.subject.strip() + "\n")
        doc = {"request": request_summary(request, ctx, index, model), "response": response_data(response)}
        files.write_text(path, HEADER + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100))
        return path


class Replayer:
    """Serves the recorded response of the index-th call of a theme and stage."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._themes: dict[str, Path] | None = None

    def theme_folder(self, ctx: CallContext) -> Path:
        """The folder of the theme's recordings: the one whose theme.txt is the whole theme, else
        (a hand-written folder with no theme.txt) the one named after the theme."""
        named = self.root / slug(ctx.theme)
        if not ctx.subject:
            return named
        found = self._index().get(_words(ctx.subject))
        if found is not None:
            return found
        if named.is_dir() and not (named / THEME_TEXT).is_file():
            return named
        raise ReplayMissing(f"no recording of the theme {_words(ctx.subject)[:80]!r} in the replay folder "
                            f"{self.root}: expected a folder there whose {THEME_TEXT} holds this whole theme",
                            str(named))

    def serves(self, theme: str, text: str) -> str:
        """"" when the recordings hold the theme named `theme` with the whole text `text`, else why not
        (theme_folder's ReplayMissing message): generate says it before any theme runs."""
        try:
            self.theme_folder(CallContext(theme=theme, subject=text))
        except ReplayMissing as missing:
            return str(missing)
        return ""

    def recorded(self) -> int:
        """How many themes the recordings hold."""
        return len(self._index())

    def _index(self) -> dict[str, Path]:
        if self._themes is None:
            self._themes = {}
            for path in sorted(self.root.glob(f"*/{THEME_TEXT}")):
                if path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_THEME_BYTES:
                    text = path.read_text(encoding="utf-8", errors="replace")
                    self._themes.setdefault(_words(text), path.parent)
        return self._themes

    def load(self, ctx: CallContext, index: int, reply_bytes: int | None = None) -> Response:
        """The recorded reply; with `reply_bytes` (the call's reply cap), a file longer than it plus
        SUMMARY_BYTES is refused unread. It is parsed by the bounded YAML reader either way."""
        folder = self.theme_folder(ctx) / slug(ctx.stage)
        path = folder / f"{index:03d}.yaml"
        if not path.is_file():
            raise ReplayMissing(
                f"no recording for call {index} of stage {ctx.stage!r} of theme {ctx.theme!r}: "
                f"expected the file {path}", str(path))
        most = safe_io.MAX_BYTES * 100 if reply_bytes is None else reply_bytes + SUMMARY_BYTES
        try:
            doc = safe_io.parse_yaml(safe_io.read_text(folder, path.name, most, str(path)), str(path), RECORDING_DEPTH)
        except LocatedError as exc:
            raise ReplayInvalid(f"not a recording envforge can read: {exc}") from exc
        return parse_response(doc, path, ctx, index)


def _words(text: str) -> str:
    return " ".join(text.split())


def parse_response(doc: Any, path: Path, ctx: CallContext, index: int) -> Response:
    if not isinstance(doc, dict) or not isinstance(doc.get("response"), dict):
        raise ReplayInvalid(f"{path}: expected a mapping with a 'response:' mapping at the top level")
    r = doc["response"]
    text = r.get("text", "")
    if not isinstance(text, str):
        raise ReplayInvalid(f"{path}: response.text: expected a string, found {type(text).__name__}")
    calls: list[ToolCall] = []
    for n, call in enumerate(r.get("tool_calls") or [], start=1):
        where = f"{path}: response.tool_calls[{n - 1}]"
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ReplayInvalid(f"{where}: expected a mapping with 'name' (string) and 'arguments' (mapping)")
        arguments = call.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise ReplayInvalid(f"{where}.arguments: expected a mapping, found {type(arguments).__name__}")
        call_id = str(call.get("id") or f"call_{slug(ctx.stage)}_{index:03d}_{n}")
        calls.append(ToolCall(call_id, call["name"], arguments, str(call.get("problem") or "")))
    usage_data = r.get("usage") or {}
    try:
        usage = Usage(**{k: int(v) for k, v in usage_data.items()})
    except (TypeError, ValueError, AttributeError) as exc:
        raise ReplayInvalid(
            f"{path}: response.usage: expected integers among input_tokens, output_tokens, "
            f"cache_read_tokens, cache_write_tokens; found {usage_data!r}") from exc
    stop_reason = r.get("stop_reason") or ("tool_use" if calls else "end_turn")
    return Response(text=text, tool_calls=tuple(calls), stop_reason=str(stop_reason), usage=usage,
                    model=str(r.get("model") or "replay"), source="replay")
