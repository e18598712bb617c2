"""Reading a themes file: one theme per line, or a YAML list with optional fields.

File-level problems (missing, too big, undecodable, empty, YAML beyond the bounded loader's
limits) stop the command with a UserError; a theme too long becomes that theme's rejection at
stage "input". A theme given twice (the same words, whatever the case and spacing) is one
theme: the repeat is dropped with a warning, so it is neither run twice nor counted twice.
"""
from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from envforge.pipeline import safe_io
from envforge.pipeline.errors import LocatedError, UserError
from envforge.pipeline.kinds import ThemeRecord

MAX_THEME_CHARS = 2000
MAX_FILE_BYTES = 10_000_000
HASH_CHARS = 6
_FIELDS = {"theme", "name", "tags", "notes"}


@dataclass(frozen=True)
class Theme:
    name: str  # folder name: the given `name`, else the theme's first words and a hash of all of it
    text: str
    where: str  # "themes.txt:3"
    tags: dict = field(default_factory=dict)
    notes: str = ""
    problem: str = ""  # why it is rejected before any stage runs

    def record(self) -> ThemeRecord:
        """What theme.json keeps of it."""
        return ThemeRecord(self.name, self.text, self.tags, self.notes, self.where)

    @classmethod
    def from_record(cls, record: ThemeRecord) -> "Theme":
        return cls(record.name, record.theme, record.where, record.tags, record.notes)


def load_themes(path: str | Path) -> list[Theme]:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"--themes {path}: expected a file of themes (one per line, or a YAML list), found "
                        + ("a folder" if path.is_dir() else "no such file"))
    with open(path, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise UserError(
            f"--themes {path}: expected a themes file of at most {MAX_FILE_BYTES // 1_000_000} MB, found more"
        )
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")  # a byte order mark an editor wrote
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise UserError(f"{path}:{line}: expected UTF-8 text, found byte 0x{data[e.start]:02x} "
                        f"that is not valid UTF-8 (at byte {e.start})") from None
    raw = _yaml_items(path, text) if _is_yaml_list(path, text) else _line_items(path, text)
    if not raw:
        raise UserError(f"{path}: expected at least one theme (blank lines and # comments are ignored), found none")
    return _named(raw)


def _is_yaml_list(path: Path, text: str) -> bool:
    if path.suffix in (".yaml", ".yml"):
        return True
    first = next((ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), "")
    return first.startswith("- ")


def _line_items(path: Path, text: str) -> list[dict]:
    return [{"theme": ln.strip(), "where": f"{path.name}:{i}"}
            for i, ln in enumerate(text.splitlines(), 1) if ln.strip() and not ln.lstrip().startswith("#")]


def _yaml_items(path: Path, text: str) -> list[dict]:
    try:  # bounded: nesting, integer size and alias expansion (a 616-byte alias bomb is billions of nodes)
        doc = safe_io.parse_yaml(text, str(path))
    except LocatedError as e:
        p = e.problem
        raise UserError(f"{p.file}{f':{p.line}' if p.line else ''}: expected a YAML list of themes within "
                        f"{p.expected}, found {p.found}") from None
    if doc is None:
        return []
    if not isinstance(doc, list):
        raise UserError(f"{path}: expected a YAML list of themes, found a {type(doc).__name__}")
    items = []
    for i, entry in enumerate(doc):
        where = f"{path.name}[{i}]"
        if isinstance(entry, str):
            entry = {"theme": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("theme"), str) or not entry["theme"].strip():
            raise UserError(
                f"{path}[{i}]: expected a theme string or a mapping with a 'theme' string, found {entry!r:.80}"
            )
        unknown = set(entry) - _FIELDS
        if unknown:
            raise UserError(f"{path}[{i}]: expected only the fields {sorted(_FIELDS)}, found {sorted(unknown)}")
        if "tags" in entry and not isinstance(entry["tags"], dict):
            raise UserError(
                f"{path}[{i}].tags: expected a mapping (e.g. {{reward: binary}}), found {entry['tags']!r:.60}"
            )
        items.append({**entry, "theme": entry["theme"].strip(), "where": where})
    return items


def slug(text: str, words: int = 6, limit: int = 48) -> str:
    s = re.sub(r"[^a-z0-9]+", "_", " ".join(text.lower().split()[:words])).strip("_")
    return s[:limit].rstrip("_") or "theme"


def folder_name(text: str) -> str:
    """A theme's folder name: stable (the same theme, the same name, whatever else is in the file)
    and unique (two themes sharing their first words differ in the hash of the whole theme)."""
    digest = hashlib.sha256(_key(text).encode("utf-8")).hexdigest()[:HASH_CHARS]
    return f"{slug(text)}_{digest}"


def _key(text: str) -> str:
    return " ".join(text.lower().split())


def _named(items: list[dict]) -> list[Theme]:
    themes, names, seen = [], set(), {}
    for item in items:
        text = item["theme"]
        key = _key(text)
        if key in seen:
            print(f"envforge: warning: {item['where']}: the same theme as {seen[key]}; merged with it (run and "
                  f"counted once)", file=sys.stderr)
            continue
        base = slug(str(item["name"])) if item.get("name") else folder_name(text)
        name, n = base, 2
        while name in names:
            name, n = f"{base}_{n}", n + 1
        names.add(name)
        problem = ""
        if len(text) > MAX_THEME_CHARS:
            problem = f"theme is {len(text)} characters long; expected at most {MAX_THEME_CHARS}"
        seen[key] = item["where"]
        themes.append(
            Theme(name, text, item["where"], dict(item.get("tags") or {}), str(item.get("notes") or ""), problem)
        )
    return themes
