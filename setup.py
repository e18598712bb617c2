"""Build hook: envforge is one import root over the checkout's top-level folders. `envforge/` is the
Python API; `pipeline/`, `learning/` and `dsl_schema/` are installed under it as envforge.pipeline,
envforge.learning and envforge.dsl_schema (no generic names at the top of site-packages), in a wheel
and in an editable install alike. envforge's data folders, kept at the top of the checkout (prompts
live in templates/), are copied into the built package as envforge/pipeline/_data/, where
pipeline/paths.py finds them in an installed wheel. An editable install reads them from the checkout."""
import shutil
from pathlib import Path

from setuptools import find_namespace_packages, setup
from setuptools.command.build_py import build_py

ROOTS = {"envforge": "envforge", "envforge.pipeline": "pipeline", "envforge.learning": "learning",
         "envforge.dsl_schema": "dsl_schema"}  # import name -> checkout folder
DATA = ("templates", "examples", "generated_envs/reference")  # checkout folders the product reads at run time


def packages() -> list[str]:
    found = []
    for name, folder in ROOTS.items():
        subpackages = find_namespace_packages(folder, exclude=["*__pycache__*", "_data*"])
        found += [name] + [f"{name}.{sub}" for sub in subpackages
                           if name == "envforge" or f"{name}.{sub}" not in ROOTS]
    return found


class BuildWithData(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        data = Path(self.build_lib) / "envforge" / "pipeline" / "_data"
        shutil.rmtree(data, ignore_errors=True)  # nothing left over from an earlier build
        for folder in DATA:
            shutil.copytree(folder, data / folder,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_work", "manifest.json.tmp"))


setup(packages=packages(), package_dir=ROOTS, cmdclass={"build_py": BuildWithData})
