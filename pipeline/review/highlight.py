"""Syntax highlighting for the HTML report, done when the page is written (no script in the page).

Python is split by the standard library's own tokenizer, so it is exact, and code that does not
tokenize (the coding agent's broken files are what a reviewer most wants to read) keeps the
colours up to the error and plain text after. YAML, JSON, Markdown and diffs are coloured line by
line with a few patterns. Every piece of text is HTML-escaped: the files were written by a model.
"""
from __future__ import annotations

import builtins
import io
import keyword
import re
import tokenize

from markupsafe import Markup, escape

_BUILTINS = set(dir(builtins))
Span = tuple[int, int, str]  # [start, end) offsets into the text, CSS class


def highlight(name: str, text: str) -> Markup:
    """The text as HTML with <span class="..."> around its tokens, chosen by the file name."""
    if name.endswith(".py"):
        spans = _python(text)
    elif name.endswith((".yaml", ".yml")):
        spans = _by_line(text, _yaml_line)
    elif name.endswith((".json", ".jsonl")):
        spans = _by_line(text, _json_line)
    elif name.endswith(".md"):
        spans = _by_line(text, _markdown_line)
    elif name.endswith((".diff", ".patch")):
        spans = _by_line(text, _diff_line)
    else:
        spans = []
    return _wrap(text, spans)


def _wrap(text: str, spans: list[Span]) -> Markup:
    out, at = [], 0
    for start, end, css in sorted(spans):
        if start < at or end <= start:
            continue  # overlapping patterns: the first one wins
        out.append(escape(text[at:start]))
        out.append(Markup('<span class="%s">%s</span>') % (css, text[start:end]))
        at = end
    out.append(escape(text[at:]))
    return Markup("").join(out)


def _python(text: str) -> list[Span]:
    lines = io.StringIO(text).readlines()
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    spans: list[Span] = []
    previous = ""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            css = _python_class(tok, previous)
            if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT):
                previous = tok.string
            if css and tok.start[0] - 1 < len(lines) and tok.end[0] - 1 < len(lines):
                spans.append((starts[tok.start[0] - 1] + tok.start[1], starts[tok.end[0] - 1] + tok.end[1], css))
    except (tokenize.TokenError, SyntaxError):
        pass  # what tokenized so far stays coloured
    return spans


def _python_class(tok: tokenize.TokenInfo, previous: str) -> str:
    if tok.type == tokenize.NAME:
        if previous in ("def", "class"):
            return "fn"
        if keyword.iskeyword(tok.string):
            return "kw"
        return "bi" if tok.string in _BUILTINS else ""
    return {tokenize.STRING: "st", tokenize.COMMENT: "cm", tokenize.NUMBER: "nu"}.get(tok.type, "")


def _by_line(text: str, line_spans) -> list[Span]:
    spans, at = [], 0
    for line in text.splitlines(keepends=True):
        spans += [(at + s, at + e, css) for s, e, css in line_spans(line.rstrip("\r\n"))]
        at += len(line)
    return spans


_YAML_KEY = re.compile(r"^(\s*(?:-\s+)?)([^\s#'\"{}\[\],:][^#:{}\[\]]*?|\"[^\"]*\"|'[^']*')\s*:(?=\s|$)")
_QUOTED = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'")
_SCALAR = re.compile(r"(?<![\w.])(?:-?\d+(?:\.\d+)?|true|false|null|True|False|~)(?![\w.])")


def _yaml_line(line: str) -> list[Span]:
    spans: list[Span] = []
    comment = _comment_start(line)
    code = line[:comment] if comment is not None else line
    if comment is not None:
        spans.append((comment, len(line), "cm"))
    key = _YAML_KEY.match(code)
    if key:
        spans.append((key.start(2), key.end(2), "ky"))
    rest = key.end() if key else 0
    spans += [(m.start(), m.end(), "st") for m in _QUOTED.finditer(code, rest)]
    spans += [(m.start(), m.end(), "nu") for m in _SCALAR.finditer(code, rest)]
    return spans


def _comment_start(line: str) -> int | None:
    """Where a YAML comment starts: a # at the line start or after a space, outside quotes."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'" and (i == 0 or line[i - 1] in " :[{,-"):
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return i
    return None


_JSON_KEY = re.compile(r"\"(?:[^\"\\]|\\.)*\"(?=\s*:)")


def _json_line(line: str) -> list[Span]:
    spans = [(m.start(), m.end(), "ky") for m in _JSON_KEY.finditer(line)]
    spans += [(m.start(), m.end(), "st") for m in re.finditer(r"\"(?:[^\"\\]|\\.)*\"", line)]
    return spans + [(m.start(), m.end(), "nu") for m in _SCALAR.finditer(line)]


def _markdown_line(line: str) -> list[Span]:
    if re.match(r"#{1,6}\s", line):
        return [(0, len(line), "hd")]
    return [(m.start(), m.end(), "st") for m in re.finditer(r"`[^`]+`", line)]


def _diff_line(line: str) -> list[Span]:
    css = ("hd" if line.startswith(("+++", "---", "@@")) else
           "ad" if line.startswith("+") else "rm" if line.startswith("-") else "")
    return [(0, len(line), css)] if css and line else []
