"""What envforge writes into another language's text is quoted for that language.

An environment's name is its folder's name, and its instruction, reasons and paths come from files
a model wrote: any of them may hold quotes, newlines, braces, backslashes or `$(...)`. Written
unquoted into an exported module, a pyproject file, a README or a suggested command, such text
becomes code (importing a module made from a hostile folder name ran a shell command). Each
function here writes a value as a literal of one language, read back as exactly that value.
HTML is the report templates' (Jinja2 with autoescape on, pipeline/review/report.py).
"""
from __future__ import annotations

import shlex

# TOML basic strings: these characters written as escapes, every other control character as \\uXXXX.
_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def python(value: str) -> str:
    """A Python string literal holding `value`."""
    return repr(str(value))


def toml(value: str) -> str:
    """A TOML basic string (quoted) holding `value`; a character that is not text (a lone surrogate,
    as a folder name undecodable in UTF-8 reads) is written as U+FFFD."""
    out = []
    for c in str(value):
        if c in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[c])
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04X}")
        elif 0xD800 <= ord(c) <= 0xDFFF:
            out.append("\\uFFFD")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def one_line(value: str) -> str:
    """`value` on one line, as inside a Python string literal: newlines, other control characters,
    backslashes and the quote written as escapes (a package summary, a heading)."""
    return repr(str(value))[1:-1]


def markdown_code(value: str) -> str:
    """A Markdown code span showing `one_line(value)`, fenced by more backticks than it holds in a
    row: never markup or HTML."""
    text = one_line(value)
    run = longest = 0
    for c in text:
        run = run + 1 if c == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def shell(value: str) -> str:
    """`value` as one word of a POSIX shell command (what a suggested command names)."""
    return shlex.quote(str(value))


def command(*words: str) -> str:
    """A POSIX shell command line of `words`, each quoted."""
    return shlex.join(str(w) for w in words)
