"""Where the shipped data folders are: beside the package (editable install or a
checkout) or under ``<prefix>/share/tvm_eqsat`` (a regular install)."""

from __future__ import annotations

import sys
from pathlib import Path


def data_dir(name: str) -> Path:
    """The shipped folder ``name`` (``rules``, ``cost_models``); FileNotFoundError if absent."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / name, Path(sys.prefix) / "share" / "tvm_eqsat" / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"tvm_eqsat {name}/ folder not found next to the package or under {sys.prefix}/share")
