"""Build hook: envforge's data folders, kept at the top of the checkout (prompts live in
templates/), are copied into the built package as pipeline/_data/, where pipeline/paths.py finds
them in an installed wheel. An editable install reads them from the checkout instead."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA = ("templates", "examples", "generated_envs/reference")  # checkout folders the product reads at run time


class BuildWithData(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        data = Path(self.build_lib) / "pipeline" / "_data"
        shutil.rmtree(data, ignore_errors=True)  # nothing left over from an earlier build
        for folder in DATA:
            shutil.copytree(folder, data / folder,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_work", "manifest.json.tmp"))


setup(cmdclass={"build_py": BuildWithData})
