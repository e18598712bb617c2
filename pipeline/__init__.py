"""envforge: themes in, verified text environments out."""

__version__ = "0.1.0"
# The distribution on the package index (pyproject.toml's name; `envforge` there is another project):
# what `pip install` names. The command and the import root stay `envforge`.
DISTRIBUTION = "envforge-rl"


def install_hint(extra: str) -> str:
    """The command that installs envforge with one of its extras."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"
