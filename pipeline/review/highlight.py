"""Syntax highlighting for the HTML report, done when the page is written (no script in the page):
Pygments' lexers, chosen by the file name, with its token types mapped onto the report's few CSS
classes (templates/report/style.css.j2). Lexers never fail on broken input, so the coding
agent's broken files (what a reviewer most wants to read) stay coloured. Every piece of text is
HTML-escaped: the files were written by a model.
"""
from __future__ import annotations

from markupsafe import Markup, escape
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.token import Comment, Generic, Keyword, Name, Number, String
from pygments.util import ClassNotFound

# Checked in order: the first token type that contains a token's type names its class.
CLASSES = ((Name.Function, "fn"), (Name.Class, "fn"), (Name.Builtin, "bi"), (Name.Tag, "ky"),
           (Name.Attribute, "ky"), (Keyword.Constant, "nu"), (Keyword, "kw"), (String, "st"), (Comment, "cm"),
           (Number, "nu"), (Generic.Heading, "hd"), (Generic.Subheading, "hd"), (Generic.Inserted, "ad"),
           (Generic.Deleted, "rm"))
BY_SUFFIX = {".jsonl": "json", ".j2": "jinja"}


def highlight(name: str, text: str) -> Markup:
    """The text as HTML with <span class="..."> around its tokens, chosen by the file name;
    unknown kinds of file come back plain (escaped), the text itself always unchanged."""
    options = {"stripnl": False, "ensurenl": False}
    suffix = name[name.rfind("."):] if "." in name else ""
    try:
        lexer = (get_lexer_by_name(BY_SUFFIX[suffix], **options) if suffix in BY_SUFFIX
                 else get_lexer_for_filename(name, **options))
    except ClassNotFound:
        return Markup(escape(text))
    runs: list[list[str]] = []  # [css, text]: neighbouring tokens of one class in one span
    for ttype, value in lexer.get_tokens(text):
        css = next((c for t, c in CLASSES if ttype in t), "") if value.strip() else ""
        if runs and runs[-1][0] == css:
            runs[-1][1] += value
        else:
            runs.append([css, value])
    return Markup("").join(Markup('<span class="%s">%s</span>') % (css, value) if css else escape(value)
                           for css, value in runs)
