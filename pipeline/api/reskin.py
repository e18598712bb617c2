"""A new skin (rendering) for an environment, checked to leave its dynamics unchanged: the library
call under `envforge reskin`. json, narrative and inverse come from templates; any other style is
written by the model (`ReskinJob.needs_model`).
"""
from __future__ import annotations

import dataclasses
import difflib

from envforge.pipeline import layout
from envforge.pipeline.api.options import ExecutorOptions, LLMOptions, Options, group, option
from envforge.pipeline.api.values import COUNT, SEED
from envforge.pipeline.envfolder.spec import EnvSpec
from envforge.pipeline.errors import UserError
from envforge.pipeline.reskin import TEMPLATE_STYLES, Reskinned, recheck, reskin_template
from envforge.pipeline.sandbox.outside.executor import running_on


@dataclasses.dataclass(frozen=True)
class ReskinOptions(Options):
    REQUIRED = ("what",)
    style: str | None = option(None, metavar="STYLE", exclusive="what",
                               help=f"{', '.join(TEMPLATE_STYLES)} (templates, no model) or any other style name "
                                    "(written by the model)")
    check: str | None = option(None, metavar="NAME", exclusive="what", help="check the existing skins/NAME.py again")
    name: str | None = option(None, help="skin name (default: the style)")
    hint: bool = option(False, help="inverse: start every observation with E.3's warning that semantics may be "
                        "inverted")
    sequences: int = option(2, COUNT, metavar="N", help="random action sequences per level in the identity check, "
                            "besides the planner's (default {default})")
    attempts: int = option(3, COUNT, metavar="N",
                           help="model-written skins: attempts, each after the check's feedback (default {default})")
    seed: int = option(0, SEED, help="seed of the random sequences (default {default})")
    llm: LLMOptions = group(LLMOptions)
    executor: ExecutorOptions = group(ExecutorOptions)


class ReskinJob:
    """One skin to write (or check again), checked before anything is written."""

    def __init__(self, env_dir: str, options: ReskinOptions):
        if bool(options.style) == bool(options.check):
            raise UserError("expected one of --style STYLE or --check NAME")
        self.options = options
        self.executor = options.executor.start()
        self.spec = EnvSpec.open(env_dir, full_paths=False).playable()  # a LocatedError names the file
        self.check_args = {"random_sequences": options.sequences, "seed": options.seed}
        if options.check:
            skins = self.spec.dir.skins()
            if options.check not in skins:
                raise UserError(f"--check {options.check}: expected skins/{options.check}.py in {self.spec.path}, "
                                f"found {', '.join(skins) or 'no skins'}")
            self.name = options.check
            return
        close = difflib.get_close_matches(options.style.lower(), TEMPLATE_STYLES, n=1, cutoff=0.6)
        if options.style not in TEMPLATE_STYLES and close and not options.name:
            # A typo of a template's name would otherwise become a model-written style (and a model call).
            raise UserError(f"--style {options.style}: expected {', '.join(TEMPLATE_STYLES)} or a style for the "
                            f"model to write, found {options.style!r}, close to {close[0]!r}: did you mean --style "
                            f"{close[0]}? (to have the model write {options.style!r}, give it a --name)")
        self.name = options.name or options.style
        if not layout.SKIN_NAME.fullmatch(self.name) or self.name.startswith("_"):
            raise UserError(f"--name: expected letters, digits, '-' or '_' (not first), found {self.name!r}; "
                            "pass --name for a style with spaces")

    @property
    def needs_model(self) -> bool:
        return not self.options.check and self.options.style not in TEMPLATE_STYLES

    def run(self) -> Reskinned:
        """A template skin, or the check of an existing one (no model)."""
        with running_on(self.executor):
            if self.options.check:
                return recheck(self.spec, self.name, **self.check_args)
            try:
                return reskin_template(self.spec, self.options.style, self.name, hint=self.options.hint,
                                       **self.check_args)
            except ValueError as e:
                raise UserError(f"--style {self.options.style}: {e}") from None

    async def run_with_model(self, client) -> Reskinned:
        """A skin the model writes in `options.style`, checked after each attempt."""
        from envforge.pipeline.reskin.model import reskin_with_model

        with running_on(self.executor):
            return await reskin_with_model(self.spec, client, self.options.style, self.name,
                                           attempts=self.options.attempts, **self.check_args)
