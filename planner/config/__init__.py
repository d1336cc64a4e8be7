"""The one YAML schema shared by model cards and user configs: reading, overlaying, validating.

Raw dicts are merged first (card, then variant, then user overlay) and validated once as a whole,
so a rule is checked in one place whatever layer a value came from. One module per step:
`yaml_loader` reads a file (a key given twice is an error), `overlay` merges the layers, `keys`
lists the schema's keys, `values` checks single values, `stage_schema` checks one stage and
`pipeline_checks` checks the whole pipeline and builds it.
"""

from __future__ import annotations

from planner.config.keys import (
    CARD_KEYS,
    DEFAULT_SAMPLE_RATE,
    PIPELINE_KEYS,
    PLACEMENT_KEYS,
    SAMPLE_RATES,
    STAGE_KEYS,
)
from planner.config.overlay import overlay
from planner.config.pipeline_checks import build_pipeline
from planner.config.values import (
    NAME_CHARS,
    PROCESS_NAME_CHARS,
    check_keys,
    key_path,
    name_problem,
)
from planner.config.yaml_loader import read_yaml

__all__ = [
    "CARD_KEYS", "DEFAULT_SAMPLE_RATE", "NAME_CHARS", "PIPELINE_KEYS", "PLACEMENT_KEYS",
    "PROCESS_NAME_CHARS", "SAMPLE_RATES", "STAGE_KEYS", "build_pipeline",
    "check_keys", "key_path", "name_problem", "overlay", "read_yaml",
]
