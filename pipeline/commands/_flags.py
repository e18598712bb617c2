"""The command layer's flags: every argparse use of envforge is in pipeline/commands/ and cli.py.

A command's flags are derived from its library options (pipeline/api/options.py), where each
option is declared once: `@command("probe", ProbeOptions, ...)` over its run function gives
`envforge probe` a flag per field of ProbeOptions, with the field's default, check, help, metavar and
section, so the command line and the Python API cannot differ. A check's `BadValue` becomes
argparse's one line naming the flag, exit 2:
`envforge evaluate: error: argument --max-steps: expected a whole number >= 1, found '-5'`.
"""
from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Callable, Sequence

from envforge.pipeline.api.options import Options
from envforge.pipeline.api.values import BadValue

Argument = tuple[tuple[str, ...], dict]  # a command's own argument: add_argument's flags and keywords


def arg(*flags: str, **keywords: Any) -> Argument:
    """A command's own argument (a positional, --json): not an option of the library call."""
    return flags, keywords


def env_dir(then: str = "") -> Argument:
    """ENV_DIR: the environment folder a command works on (`then`: what more the command says of it)."""
    return arg("env_dir", metavar="ENV_DIR", help="environment folder" + then)


def env_dirs(then: str = "", nargs: str = "*") -> Argument:
    """ENV_DIR...: the environment folders a command works on, or folders holding them."""
    return arg("env_dirs", nargs=nargs, metavar="ENV_DIR", help="environment folders, or folders holding them" + then)


def flag_type(check: Callable[[Any], Any]) -> Callable[[str], Any]:
    """A value check as an argparse `type`: its message becomes argparse's error line."""
    def parse(text: str) -> Any:
        try:
            return check(text)
        except BadValue as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    parse.__name__ = check.__name__
    return parse


def command(name: str, options: type[Options] | None = None, *, arguments: Sequence[Argument] = (),
            json: str | None = None, without: Sequence[str] = (),
            **parser_keywords: Any) -> Callable[[Callable[..., int]], Command]:
    """Declares the function below as the command `envforge NAME` (see Command): `@command("probe",
    ProbeOptions, help=..., arguments=[env_dir()], json="...")` over `def run(args, options)`."""
    def declare(run: Callable[..., int]) -> Command:
        return Command(name, run, options, tuple(arguments), json, tuple(without), parser_keywords)
    return declare


@dataclasses.dataclass(frozen=True)
class Command:
    """A command as its module declares it: its name, the function that runs it, the options its
    flags make, its own `arguments` (a positional, --probes), the help of its --json (None: it has
    none), the options or groups it does not offer (`without`: they keep their default) and
    add_parser's keywords (help, description, epilog, ...)."""
    name: str
    run: Callable[..., int]
    options: type[Options] | None
    arguments: tuple[Argument, ...]
    json: str | None
    without: tuple[str, ...]
    parser_keywords: dict[str, Any]

    def register(self, subparsers) -> argparse.ArgumentParser:
        """The parser of `envforge NAME`: its own arguments first, then the flags of its options (those
        listed in no section, then --json, then the sections: add_options)."""
        parser = subparsers.add_parser(self.name, **self.parser_keywords)
        for flags, keywords in self.arguments:
            parser.add_argument(*flags, **keywords)
        if self.options is not None:
            add_options(parser, self.options, sectioned=False, without=self.without)
        if self.json:
            parser.add_argument("--json", action="store_true", help=self.json)
        if self.options is not None:
            add_options(parser, self.options, sectioned=True, without=self.without)
        parser.set_defaults(func=self)
        return parser

    def __call__(self, args) -> int:
        """flags -> options -> the call: `run(args, options)`, or `run(args)` for a command with no options."""
        return self.run(args) if self.options is None else self.run(args, self.options.from_args(args))


def add_options(parser, options: type[Options], *, sectioned: bool | None = None, without: Sequence[str] = (),
                sections: dict[str, Any] | None = None) -> None:
    """A flag for every option of `options`, in declaration order, each option of a group (LLMOptions,
    ExecutorOptions) under its group's section; `sectioned` True or False: only the options listed in
    a section, or only the others. `sections`: the parser's argument groups by title, so far."""
    sections = {} if sections is None else sections
    exclusive: dict[str, Any] = {}

    def where(title: str | None):
        if title is None:
            return parser
        if title not in sections:
            sections[title] = parser.add_argument_group(title)
        return sections[title]

    if options.SECTION:  # its options are all listed under its section
        if sectioned is False:
            return
        parser = where(options.SECTION)
        sectioned = None
    for f in dataclasses.fields(options):
        if f.name in without:
            continue
        if "group" in f.metadata:
            if sectioned is not False:
                add_options(parser, f.metadata["group"], sectioned=None, sections=sections)
            continue
        title = f.metadata.get("section")
        if sectioned is not None and sectioned != (title is not None):
            continue
        container = where(title)
        key = f.metadata.get("exclusive")
        if key:
            if key not in exclusive:
                exclusive[key] = container.add_mutually_exclusive_group(required=key in options.REQUIRED)
            container = exclusive[key]
        _add_flag(container, f, options)


def _add_flag(container, field: dataclasses.Field, options: type[Options]) -> argparse.Action:
    """The flag of one option: its default and check are the field's; a bool option is a switch; a
    check with `choices` lists them; `{default}` in the help is the default `options` shows
    (Options.shown_default; a float as %g)."""
    meta = field.metadata
    default = field.default
    check = meta.get("check")
    said = meta.get("help", "")
    if "{default}" in said:
        shown = options.shown_default(field)
        said = said.replace("{default}", f"{shown:g}" if isinstance(shown, float) else str(shown))
    keywords: dict[str, Any] = {"default": default, "dest": field.name, "help": said or None}
    if meta.get("metavar"):
        keywords["metavar"] = meta["metavar"]
    if isinstance(default, bool):
        keywords["action"] = "store_true"
    elif check is not None and getattr(check, "choices", None):
        keywords["choices"] = check.choices
    elif check is not None:
        keywords["type"] = flag_type(check)
    return container.add_argument(*Options.flags_of(field), **keywords)
