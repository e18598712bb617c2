"""`envforge generate` against a misbehaving provider: the loopback server of pipeline/testing/llm_server.py, on the
real OpenAI or Anthropic wire, answering as a buggy provider or a runaway model does (forged or
missing usage, replies of tens of MB, whatever a test's rule sends).

    from misbehaving import WIRES, generate_against
    llm_server.rule = lambda n: Reply(design_text(), usage=forged_usage("negative"))
    run = generate_against(llm_server, "openai", tmp_path, "--budget-usd", "0.20")
    run.returncode, run.summary, run.out, llm_server.count(), llm_server.bytes_received

What a user sees comes back in `Run`: the exit code, the --json summary (stdout), the cost
summary and progress (stderr) and the output folder.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli_kit import envforge

from envforge.pipeline.testing.llm_server import LLMServer

# A priced model on each wire (pipeline/llm/prices.yaml), so a budget means dollars.
WIRES: dict[str, dict[str, str]] = {
    "openai": {"model": "openai/gpt-4o-mini", "key": "OPENAI_API_KEY"},
    "anthropic": {"model": "anthropic/claude-haiku-4-5", "key": "ANTHROPIC_API_KEY"},
}
THEMES = "A maze with keys\nA garden to water\nA lighthouse keeper's night\n"


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    out: Path

    @property
    def summary(self) -> dict[str, Any]:
        """The --json summary on stdout; a clear failure when there is none."""
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError:
            raise AssertionError(f"no JSON summary on stdout (exit {self.returncode});"
                                 f" stderr:\n{self.stderr[-3000:]}") from None

    def stored_bytes(self) -> int:
        """Bytes of every file under the output folder: what the run kept on disk."""
        return sum(p.stat().st_size for p in self.out.rglob("*") if p.is_file() and not p.is_symlink())

    def largest_stored(self) -> tuple[int, Path | None]:
        files = [p for p in self.out.rglob("*") if p.is_file() and not p.is_symlink()]
        if not files:
            return 0, None
        biggest = max(files, key=lambda p: p.stat().st_size)
        return biggest.stat().st_size, biggest


def base_url(server: LLMServer, wire: str) -> str:
    return server.openai_url if wire == "openai" else server.url


def generate_against(server: LLMServer, wire: str, tmp_path: Path, *extra: str, themes: str = THEMES,
                     out: Path | None = None, timeout: int = 600) -> Run:
    """Run `envforge generate --json` on `themes` against `server` on `wire` ("openai" or
    "anthropic"), one theme at a time, with the test's extra arguments (budgets, say), through
    cli_kit.envforge with exactly the environment made here."""
    themes_file = tmp_path / "themes.txt"
    themes_file.write_text(themes)
    out = out or tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.endswith("_BASE_URL")}
    env.update({WIRES[wire]["key"]: "test-key", "ENVFORGE_CACHE": str(tmp_path / "cache.sqlite"),
                "ENVFORGE_DOTENV": str(tmp_path / ".env"), "ENVFORGE_RETRY_BASE_DELAY": "0.01",
                "NO_PROXY": "127.0.0.1,localhost"})
    env.pop("ENVFORGE_PRICES", None)
    env.pop("ENVFORGE_MODEL", None)
    argv = ["generate", "--themes", str(themes_file), "--out", str(out),
            "--model", WIRES[wire]["model"], "--base-url", base_url(server, wire), "--concurrency", "1", "--json",
            *extra]
    done = envforge(*argv, cwd=tmp_path, env=env, timeout=timeout, traceback_ok=True)
    return Run(done.returncode, done.stdout, done.stderr, out)
