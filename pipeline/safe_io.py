"""Bounded, no-follow reading of files in an environment folder or written by a model.

Every such file is hostile input on the host. A file is opened relative to the folder, one
path component at a time with O_NOFOLLOW, so no symlink is ever followed (a link to
`~/.ssh/id_rsa` or `/dev/zero` is refused, not read); only regular files with one link are read
(a hard link may point outside); reads stop at a byte cap. Parsers are bounded too: nesting
depth, integer length and, for YAML, the size the document has once its aliases are expanded
(a 600-byte alias bomb expands to billions of nodes). Every failure is a `LocatedError` that
names the file, the line when known, what was expected and what was found.
"""
from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import secrets
import stat
from itertools import accumulate
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

import yaml

from envforge.pipeline.located import LocatedError

MAX_BYTES = 1_000_000  # a config, an instruction, a manifest
MAX_DEPTH = 100  # nesting of mappings and lists
MAX_INT_DIGITS = 100
MAX_NODES = 1_000_000  # a YAML document's nodes once its aliases are expanded


def _fail(file: str, expected: str, found: str, line: int | None = None) -> LocatedError:
    return LocatedError.at(file, expected, found, line)


def _parts(rel: str | Path, file: str) -> list[str]:
    parts = [p for p in PurePosixPath(str(rel)).parts if p not in ("", ".")]
    if str(rel).startswith("/") or ".." in parts:
        raise _fail(file, "a path inside the environment folder", repr(str(rel)))
    return parts


def _open(root: Path, rel: str | Path, file: str, directory: bool = False) -> int:
    """A file descriptor for `rel` under `root`, reached without following any link."""
    parts = _parts(rel, file)
    if not parts and not directory:
        raise _fail(file, "a file inside the environment folder", "the folder itself")
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        raise _fail(file, "a readable environment folder", e.strerror or type(e).__name__) from None
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            if not last or directory:
                flags |= os.O_DIRECTORY
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.EMLINK):
                    raise _fail(file, "a regular file inside the folder", "a symbolic link (never followed)") from None
                if e.errno == errno.ENOTDIR:
                    kind = "a symbolic link (never followed)" if _is_link(fd, part) else "not a folder"
                    raise _fail(file, "a folder inside the environment folder", kind) from None
                if e.errno == errno.ENOENT:
                    raise _fail(file, "the file to exist", "no such file") from None
                if e.errno == errno.ENXIO:  # a socket cannot be opened
                    raise _fail(file, "a regular file", "a socket") from None
                raise _fail(file, "a readable file", e.strerror or type(e).__name__) from None
            os.close(fd)
            fd = nxt
        info = os.fstat(fd)
        if directory:
            return fd
        if not stat.S_ISREG(info.st_mode):
            raise _fail(file, "a regular file", _kind(info.st_mode))
        if info.st_nlink > 1:
            raise _fail(
                file, "a file with one link", f"a hard link ({info.st_nlink} names; it may name a file outside)"
            )
        return fd
    except BaseException:
        os.close(fd)
        raise


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "a special file"


def _label(root: Path, rel: str | Path, label: str | None) -> str:
    return label if label is not None else str(Path(root) / str(rel))


def read_bytes(root: str | Path, rel: str | Path, limit: int = MAX_BYTES, label: str | None = None) -> bytes:
    """The bytes of the regular file `rel` inside `root`: never through a link, at most `limit`."""
    file = _label(Path(root), rel, label)
    fd = _open(Path(root), rel, file)
    try:
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise _fail(file, f"at most {limit} bytes", "a larger file")
    return b"".join(chunks)


def sha256(root: str | Path, rel: str | Path) -> str:
    """The SHA-256 of a regular file inside `root`, streamed (no size cap), never through a link."""
    fd = _open(Path(root), rel, _label(Path(root), rel, None))
    digest = hashlib.sha256()
    try:
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest()


def decode(data: bytes, file: str) -> str:
    """UTF-8 text, or a located error at the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise _fail(file, "UTF-8 text", f"byte 0x{data[e.start]:02x} at offset {e.start}", line) from None


def read_text(root: str | Path, rel: str | Path, limit: int = MAX_BYTES, label: str | None = None) -> str:
    return decode(read_bytes(root, rel, limit, label), _label(Path(root), rel, label))


def read_shown(root: str | Path, rel: str | Path, limit: int = MAX_BYTES) -> str | None:
    """A file's text to show a person (the review report): None when absent; what could not be
    read is said in its place (a link is never followed); bad bytes replaced; cut at `limit`."""
    if not exists(root, rel):
        return None
    try:
        fd = _open(Path(root), rel, str(rel))
    except LocatedError as e:
        return f"(not shown: {e})"
    try:
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    text = data[:limit].decode("utf-8", errors="replace")
    return text + (f"\n… (cut at {limit} bytes)" if len(data) > limit else "")


def exists(root: str | Path, rel: str | Path) -> bool:
    """Whether `rel` names something inside `root` (a link counts: reading it is then refused)."""
    try:
        parts = _parts(rel, str(rel))
    except LocatedError:
        return False
    path = Path(root)
    for part in parts[:-1]:
        path = path / part
        if path.is_symlink() or not path.is_dir():
            return False
    return os.path.lexists(path / parts[-1])


def is_file(root: str | Path, rel: str | Path) -> bool:
    """Whether `rel` is a regular file inside `root`, reached without a link."""
    try:
        os.close(_open(Path(root), rel, str(rel)))
    except LocatedError:
        return False
    return True


def list_files(root: str | Path, rel: str | Path, suffix: str = "", label: str | None = None) -> list[str]:
    """Names of the regular files (not links) in the folder `rel` under `root` ending in
    `suffix`, sorted; [] when there is no such folder. A link in place of the folder is refused.
    A name with a control character (a line break, an escape) is left out too: printed in a
    report, it would forge a line of its own."""
    if not exists(root, rel):
        return []
    file = _label(Path(root), rel, label)
    fd = _open(Path(root), rel, file, directory=True)
    try:
        with os.scandir(fd) as entries:
            return sorted(e.name for e in entries if e.name.endswith(suffix) and e.name.isprintable()
                          and e.is_file(follow_symlinks=False))
    finally:
        os.close(fd)


def walk(root: str | Path, skip: frozenset[str] = frozenset()) -> Iterator[str]:
    """Relative paths of every regular file under `root`, never entering a linked folder;
    folders named in `skip` are left out. Bounded in depth by the file system's own limits
    on path length (no recursion)."""
    stack = [Path(root)]
    base = Path(root)
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in skip:
                    stack.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                yield str(Path(entry.path).relative_to(base))


# -- parsers -------------------------------------------------------------------------------

class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader with a nesting-depth cap, an integer-length cap and an alias-expansion cap."""

    file = "<text>"
    most = MAX_DEPTH

    def compose_node(self, parent, index):
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > self.most:
                mark = self.peek_event().start_mark
                raise _fail(self.file, f"nesting at most {self.most} levels deep", "deeper nesting", mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self):
        node = super().compose_document()
        _expanded_size(node, self.file)
        return node

    def construct_yaml_int(self, node):
        digits = sum(c.isdigit() for c in node.value)
        if digits > MAX_INT_DIGITS:
            raise _fail(self.file, f"an integer of at most {MAX_INT_DIGITS} digits", f"one of {digits} digits",
                        node.start_mark.line + 1)
        return super().construct_yaml_int(node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)


def _expanded_size(root, file: str) -> int:
    """Nodes in the document once every alias is expanded, computed over the shared graph
    (memoised, so the cost is the document's size, not the expansion's)."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children)
            if sizes[key] > MAX_NODES:
                raise _fail(file, f"at most {MAX_NODES} nodes once aliases are expanded",
                            "more (an alias bomb?)", node.start_mark.line + 1)
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise _fail(file, "no alias inside its own anchor", "a recursive alias", node.start_mark.line + 1)
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise _fail(file, "no alias inside its own anchor", "a recursive alias", child.start_mark.line + 1)
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)] if root is not None else 0


def _children(node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def parse_yaml(text: str, file: str, most: int = MAX_DEPTH) -> Any:
    """The YAML document in `text`, bounded (nesting at most `most` levels); a located error for anything else."""
    return parse_yaml_node(text, file, most)[0]


def parse_yaml_node(text: str, file: str, most: int = MAX_DEPTH) -> tuple[Any, yaml.Node | None]:
    """The YAML document in `text` and its node tree (for line numbers), bounded."""
    loader = type("Loader", (_BoundedLoader,), {"file": file, "most": most})(text)
    try:
        node = loader.get_single_node()
        return (loader.construct_document(node) if node is not None else None), node
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise _fail(file, "valid YAML", _yaml_problem(e.problem or e.context or "malformed YAML"),
                    mark.line + 1 if mark else None) from None
    except yaml.YAMLError as e:
        raise _fail(file, "valid YAML", str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    except (RecursionError, ValueError, TypeError, OverflowError) as e:
        raise _fail(file, "valid YAML", f"{type(e).__name__}: {str(e)[:120]}") from None
    finally:
        loader.dispose()


def _yaml_problem(problem: str) -> str:
    """PyYAML's problem as the `found` part of a located error."""
    if "'\\t'" in problem:
        return "a tab character (YAML indents with spaces only)"
    return problem.removeprefix("found ")


def load_yaml(root: str | Path, rel: str | Path, limit: int = MAX_BYTES, label: str | None = None) -> Any:
    file = _label(Path(root), rel, label)
    return parse_yaml(read_text(root, rel, limit, label), file)


class _TooDeep:
    """What `parse_json(..., cut_deep=True)` puts in place of a value nested too deep."""

    def __repr__(self) -> str:
        return "<nested too deep>"


TOO_DEEP = _TooDeep()
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'  # a JSON string literal, escapes included
_STRINGS = re.compile(_STRING, re.S)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_TOKENS = re.compile(_STRING + r"|[\[\]{}]", re.S)
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_DIGITS_AS_ONES = bytes.maketrans(b"0123456789", b"1111111111")


def _risky_numbers(skeleton: str, digits: int) -> bool:
    """Whether a number in a JSON text's `skeleton` could fail the checks of `parse_json`: a run of
    more than `digits` digits, an exponent, NaN or Infinity (C string functions only)."""
    if b"1" * (digits + 1) in skeleton.encode("utf-8", "replace").translate(_DIGITS_AS_ONES):
        return True
    letters = skeleton.replace("true", "").replace("false", "")
    return "e" in letters or "E" in letters or "NaN" in skeleton or "Infinity" in skeleton


def _too_deep(skeleton: str, most: int) -> bool:
    """Whether lists and objects nest deeper than `most` in a JSON text's `skeleton` (its strings
    emptied), found at the speed of the C string functions; few brackets are not even scanned."""
    if skeleton.count("[") + skeleton.count("{") <= most:
        return False
    brackets = _NOT_BRACKETS.sub("", skeleton)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > most


def too_deep(text: str, most: int = MAX_DEPTH) -> bool:
    """Whether brackets nest deeper than `most` in `text`, JSON or a Python literal (a string in
    single quotes is counted as brackets: a shallow text may be called deep, never the reverse)."""
    return _too_deep(_STRINGS.sub('""', text), most)


def _deep_spans(text: str, most: int) -> list[tuple[int, int]]:
    """(start, end) of each outermost list or object of `text` that opens deeper than `most`."""
    spans, depth, start = [], 0, 0
    for token in _TOKENS.finditer(text):
        ch = token.group()
        if ch in "[{":
            depth += 1
            if depth == most + 1:
                start = token.start()
        elif ch in "]}":
            if depth == most + 1:
                spans.append((start, token.end()))
            depth -= 1
    if depth > most:
        spans.append((start, len(text)))  # never closed: the parser then finds the text cut short
    return spans


def _cut_deep(text: str, spans: list[tuple[int, int]]) -> tuple[str, str]:
    """`text` with each span replaced by one string no reply can foresee, and that string."""
    mark = f"\x00nested too deep {secrets.token_hex(8)}"
    pieces, at = [], 0
    for start, end in spans:
        pieces += [text[at:start], json.dumps(mark)]
        at = end
    return "".join(pieces) + text[at:], mark


def _put_too_deep(value: Any, mark: str) -> Any:
    """`value` with each string `mark` replaced by TOO_DEEP (no recursion: it is shallow, but one loop)."""
    if isinstance(value, str) and value == mark:
        return TOO_DEEP
    stack = [value]
    while stack:
        node = stack.pop()
        pairs = list(node.items()) if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in pairs:
            if isinstance(child, str) and child == mark:
                node[key] = TOO_DEEP
            elif isinstance(child, (dict, list)):
                stack.append(child)
    return value


def holds_too_deep(value: Any) -> bool:
    """Whether `value` (from `parse_json(..., cut_deep=True)`) had a part nested too deep."""
    stack = [value]
    while stack:
        node = stack.pop()
        if node is TOO_DEEP:
            return True
        stack += node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    return False


def parse_json(text: str, file: str, finite: bool = True, most: int = MAX_DEPTH, cut_deep: bool = False,
               digits: int = MAX_INT_DIGITS) -> Any:
    """The JSON value in `text`, bounded: lists and objects nest at most `most` levels (the
    recursive parser never sees deeper), integers have at most `digits` digits, and with
    `finite`, NaN and ±Infinity (and numbers too large for a float) are refused. Deeper nesting is
    a located error, or with `cut_deep` each value that opens deeper is replaced by TOO_DEEP (a
    model's reply whose one tool call is too deep is still read: that call is refused alone)."""
    skeleton = _STRINGS.sub('""', text)  # what the checks look at: brackets, numbers, literals
    spans = _deep_spans(text, most) if _too_deep(skeleton, most) else []
    if spans and not cut_deep:
        raise _fail(file, f"nesting at most {most} levels deep", "deeper nesting", text.count("\n", 0, spans[0][0]) + 1)
    mark = ""
    if spans:
        text, mark = _cut_deep(text, spans)

    def integer(s: str) -> int:
        if len(s.lstrip("-")) > digits:
            raise _fail(file, f"an integer of at most {digits} digits", f"one of {len(s.lstrip('-'))} digits")
        return int(s)

    def number(s: str) -> float:
        value = float(s)
        if finite and not math.isfinite(value):
            raise _fail(file, "a finite number", s[:40])
        return value

    def constant(s: str) -> float:
        if finite:
            raise _fail(file, "a finite number", s)
        return float(s)

    # The checks run in Python for each number: only where one could fail them (a long run of digits,
    # an exponent, NaN or Infinity outside strings; found at C speed), so most texts parse at C speed.
    risky = _risky_numbers(skeleton, digits)
    hooks = {"parse_int": integer, "parse_float": number, "parse_constant": constant} if risky else {}
    try:
        value = json.loads(text, **hooks)
    except json.JSONDecodeError as e:
        raise _fail(file, "valid JSON", e.msg, e.lineno) from None
    except (RecursionError, ValueError) as e:
        raise _fail(file, "valid JSON", f"{type(e).__name__}: {str(e)[:120]}") from None
    return _put_too_deep(value, mark) if mark else value


def load_json(root: str | Path, rel: str | Path, limit: int = MAX_BYTES, label: str | None = None,
              finite: bool = True) -> Any:
    file = _label(Path(root), rel, label)
    return parse_json(read_text(root, rel, limit, label), file, finite)
