"""The command layer's flags: every argparse use of envforge is in pipeline/commands/ and cli.py.

A flag that sets a library option takes its default and its value check from the option's field
(pipeline/api/options.py): `add_option(parser, EvaluateOptions, "runs", help=...)` is --runs
with EvaluateOptions' default and check, so the command line and the Python API cannot differ.
A check's `BadValue` becomes argparse's one line naming the flag, exit 2:
`envforge evaluate: error: argument --max-steps: expected a whole number >= 1, found '-5'`.
"""
from __future__ import annotations

import argparse
from typing import Any, Callable

from pipeline.api.options import ExecutorOptions, LLMOptions, Options
from pipeline.api.values import BadValue
from pipeline.llm.config import LLMConfig


def flag_type(check: Callable[[Any], Any]) -> Callable[[str], Any]:
    """A value check as an argparse `type`: its message becomes argparse's error line."""
    def parse(text: str) -> Any:
        try:
            return check(text)
        except BadValue as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    parse.__name__ = check.__name__
    return parse


def add_option(parser, options: type[Options], name: str, *flags: str, **kwargs: Any) -> argparse.Action:
    """--NAME (or `flags`) for the option `name` of `options`: its default and check are the
    field's; a bool option is a switch; a check with `choices` lists them."""
    field = options.field(name)
    default = options.default(name)
    check = field.metadata.get("check")
    kwargs.setdefault("default", default)
    if isinstance(default, bool):
        kwargs.setdefault("action", "store_true")
    elif check is not None and getattr(check, "choices", None):
        kwargs.setdefault("choices", check.choices)
    elif check is not None:
        kwargs.setdefault("type", flag_type(check))
    return parser.add_argument(*(flags or ("--" + name.replace("_", "-"),)), dest=name, **kwargs)


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("model provider")
    add = lambda name, **kw: add_option(g, LLMOptions, name, **kw)  # noqa: E731
    add("model", metavar="SPEC",
        help="anthropic/<model> or openai/<model> (default: $ENVFORGE_MODEL, else from the keys set)")
    add("provider", help="provider, if SPEC does not name one")
    add("base_url", metavar="URL",
        help="API base URL, e.g. an OpenAI-compatible server (default: $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL)")
    add("api_key_env", metavar="VAR",
        help="read the API key from this environment variable instead of the provider's usual one")
    add("replay", metavar="DIR", help="serve recorded responses from DIR (with --provider replay)")
    add("record", metavar="DIR", help="write every call and its response to DIR")
    add("no_cache", help="neither read nor write the response cache")
    add("cache", metavar="PATH",
        help="response cache file (default: $ENVFORGE_CACHE or ~/.cache/envforge/responses.sqlite)")
    add("budget_usd", metavar="USD", help="stop before the run spends more than USD")
    add("theme_budget_usd", metavar="USD", help="stop a theme before it spends more than USD")
    add("prices", metavar="FILE", help="price table overriding the shipped one (same YAML format)")
    add("max_concurrency", metavar="N",
        help=f"model calls in flight at once (default {LLMConfig.max_concurrency})")
    add("timeout", metavar="SECONDS", help=f"limit for one call attempt (default {LLMConfig.timeout:g})")


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("executor")
    add_option(g, ExecutorOptions, "executor",
               help="where sandboxed work runs: this machine (local, default) or the nodes of a Ray "
                    "cluster (ray; pip install 'envforge[ray]'). Model calls and records stay here")
    add_option(g, ExecutorOptions, "ray_address", metavar="ADDRESS",
               help="the Ray cluster to join (auto, HOST:PORT or ray://HOST:PORT; default "
                    "$ENVFORGE_RAY_ADDRESS, else a new cluster on this machine)")


def add_run_arguments(parser: argparse.ArgumentParser, options: type[Options], *, jobs: str, out_help: str,
                      resume_help: str) -> None:
    """--concurrency N, --out DIR and --resume: the flags of a command that runs many jobs into one
    output folder (evaluate, generate), with `options`' defaults."""
    add_option(parser, options, "concurrency", metavar="N", help=f"{jobs} at once (default %(default)s)")
    add_option(parser, options, "out", metavar="DIR", help=out_help)
    add_option(parser, options, "resume", help=resume_help)


def add_skin_argument(parser: argparse.ArgumentParser, options: type[Options], then: str = "") -> None:
    """--skin NAME: render through one of the environment's skins (evaluate, probe)."""
    add_option(parser, options, "skin", metavar="NAME",
               help="render observations with the environment's skins/NAME.py (written by envforge reskin, listed "
                    "in its manifest)" + then)
