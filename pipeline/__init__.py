"""envforge: themes in, verified text environments out."""
from functools import cache

__version__ = "0.1.0"
# The distribution on the package index (pyproject.toml's name; `envforge` there is another project):
# what `pip install` names. The command and the import root stay `envforge`.
DISTRIBUTION = "envforge-rl"


@cache
def install_source() -> str | None:
    """The local wheel file or folder (a checkout) this envforge was installed from, as pip records it
    (PEP 610: the distribution's direct_url.json); None when pip recorded none, or names a place that is
    gone or not on this machine (then the package index's name is what installs it)."""
    import json
    from importlib import metadata
    from pathlib import Path
    from urllib.parse import unquote, urlparse

    # The first one pip installed (a build's envforge_rl.egg-info in a checkout on sys.path records none).
    texts = (d.read_text("direct_url.json") for d in metadata.distributions(name=DISTRIBUTION))
    try:
        url = urlparse(json.loads(next((t for t in texts if t), "{}")).get("url") or "")
    except (ValueError, AttributeError, OSError):
        return None
    path = Path(unquote(url.path))
    if url.scheme != "file" or url.netloc not in ("", "localhost") or not path.exists():
        return None
    return str(path)


def install_target(extra: str) -> str:
    """What `pip install` takes to install this envforge with `extra`: the wheel or checkout it was
    installed from (`envforge-rl` on the index is not this project yet), else the distribution's name."""
    return f"{install_source() or DISTRIBUTION}[{extra}]"


def install_hint(extra: str) -> str:
    """The command that installs envforge with one of its extras."""
    import shlex

    return f"pip install {shlex.quote(install_target(extra))}"
