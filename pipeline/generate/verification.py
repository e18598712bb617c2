"""Stage 5, verify: the three verification stages (execution, levels, reliability), which
also write the verified level set and the certified max rewards into the work folder."""
from __future__ import annotations

import asyncio

from pipeline.generate.context import Rejected, ThemeContext
from pipeline.verify import Options, verify_env


async def run(ctx: ThemeContext) -> dict:
    n = ctx.options.levels
    options = Options(test_levels=n - n // 3, val_levels=n // 3, write_levels=True, write=True, seed=ctx.options.seed,
                      search_seconds=ctx.options.verify_search_seconds)
    result = await asyncio.to_thread(verify_env, ctx.work, options=options)
    if not result.accepted:
        # Named after the paper's Table 2 columns: execution, levels, reliability.
        raise Rejected(result.stage or "verify", result.reason, {"verification": result.to_dict()})
    return result.to_dict()
