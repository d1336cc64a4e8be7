"""The built-in cards' JSON mirror (`models/cards.json`): each card file's CRC-32 and what it
parses to, so that a command reading a built-in card needs no YAML parser (PyYAML's import alone
was a tenth of `planner solve`'s own cold start). A card whose file no longer matches its CRC, or
that JSON cannot carry as parsed, is read from its YAML (`planner.cards`); a test keeps the
mirror current. Rewrite it after editing a card:

    python -m planner.card_mirror
"""

from __future__ import annotations

import json
import sys
import zlib
from importlib import resources
from pathlib import Path
from typing import Any

from planner.cards import MIRROR


def build(directory: Path) -> dict[str, Any]:
    """{file name: {"crc32": ..., "card": ...}} for every card file JSON can carry unchanged."""
    import yaml

    out: dict[str, Any] = {}
    for path in sorted(directory.glob("*.yaml")):
        data = path.read_bytes()
        card = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
        if json.loads(json.dumps(card)) == card:  # no dates, tuples or non-string keys
            out[path.name] = {"crc32": zlib.crc32(data), "card": card}
    return out


def text(mirror: dict[str, Any]) -> str:
    return json.dumps(mirror, indent=1, sort_keys=True) + "\n"


def main() -> int:
    directory = Path(str(resources.files("models")))
    (directory / MIRROR).write_text(text(build(directory)), encoding="utf-8")
    print(f"wrote {directory / MIRROR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
