"""envforge: themes in, verified text environments out."""

__version__ = "0.1.0"
