"""Environments written before envforge had one import root (the bundled recordings, every folder
generated until then, the prompts' own example) say `from pipeline.runtime import SkinEnv`. The
sandbox worker puts pipeline/runtime/compat on sys.path, so in the worker that name resolves here:
`pipeline.runtime` and each module under it is the very module `envforge.pipeline.runtime...` (one
module object under two names, so classes compare equal), and nothing else of envforge is reachable
as `pipeline`."""
import importlib
import importlib.abc
import importlib.util
import sys

_SERVED = "pipeline.runtime"


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name == _SERVED or name.startswith(_SERVED + "."):
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        module = importlib.import_module("envforge." + spec.name)
        spec.loader_state = module.__spec__  # the import system sets the alias's spec on it: put it back
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state  # already executed under its envforge name


sys.meta_path.insert(0, _Alias())
