"""Stage 5, verify: the three verification stages (execution, levels, reliability), which
also write the verified level set and the certified max rewards into the work folder; then,
when verification models are configured (`--verify-models`), the model-driven forms."""
from __future__ import annotations

from envforge.pipeline import layout
from envforge.pipeline.errors import Rejected
from envforge.pipeline.generate.context import StageReport, ThemeContext
from envforge.pipeline.verify import VerifyRunOptions, verify_env
from envforge.pipeline.verify.models import verify_with_models

OUTPUTS = (layout.VERIFICATION, layout.LEVEL_MAX_REWARDS, layout.LEVELS, layout.VAL_LEVELS, layout.MANIFEST)


async def run(ctx: ThemeContext) -> StageReport:
    n = ctx.options.levels
    options = VerifyRunOptions(test_levels=n - n // 3, val_levels=n // 3, write_levels=True, write=True,
                               seed=ctx.options.seed, search_nodes=ctx.options.verify_search_nodes, progress=ctx.say)
    result = await ctx.sandboxed(verify_env, ctx.work, options=options)
    if result.accepted and ctx.verifiers is not None:
        ctx.go_on()  # interrupted: the model-driven checks are still to run, so the stage is not done
        ctx.say("the model-driven checks...")
        await verify_with_models(ctx.work, ctx.verifiers, result)
    if not result.accepted:
        # Named after the paper's Table 2 columns: execution, levels, reliability.
        raise Rejected(result.reason, result.stage or "verify", {"verification": result.to_dict()}, cause=result.cause)
    return StageReport("accepted", figures=result.to_dict())
