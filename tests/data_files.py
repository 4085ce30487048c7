"""The error-body sets under tests/data, read with libyaml's parser where PyYAML has it.

The held-out set is over a hundred thousand lines: PyYAML's pure-Python parser takes
about 7 s on it, libyaml's about 1 s, and both give the same entries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).resolve().parent / "data"
CORPUS_PATH = DATA / "error_corpus.yaml"
HELDOUT_PATH = DATA / "error_heldout.yaml"
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_entries(path: Path) -> list[dict[str, Any]]:
    """A data file's entries, each a mapping (a fresh list on every call)."""
    loaded = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER) or []
    assert isinstance(loaded, list), f"{path}: not a YAML list"
    assert all(isinstance(item, dict) for item in loaded), f"{path}: an entry is no mapping"
    return loaded
