"""Run every benchmark in turn: `python -m bench` (each module also runs alone)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

SUPPORT = {"env", "metering"}


def main() -> int:
    names = sorted(
        m.name
        for m in pkgutil.iter_modules([str(Path(__file__).parent)])
        if m.name not in SUPPORT and not m.name.startswith("_")
    )
    for name in names:
        print(f"\n# bench.{name}\n", flush=True)
        status = importlib.import_module(f"bench.{name}").main([])
        if status:
            return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
