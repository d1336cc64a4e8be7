"""PyYAML's safe loader, refusing a key given twice in one mapping. Its own module so that PyYAML
is imported only when a YAML file is read (`config.read_yaml`), not by every command."""

from __future__ import annotations

from typing import Any

import yaml


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping gives one key twice; plain YAML would silently keep the last."""


class StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error."""

    def construct_mapping(self, node, deep=False):  # type: ignore[override]
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in seen:
                        raise DuplicateKeyError("while constructing a mapping", node.start_mark,
                                                f"key {key!r} is given twice", key_node.start_mark)
                    seen.add(key)
                except TypeError:
                    pass  # an unhashable key: the base class says so with its line
        return super().construct_mapping(node, deep=deep)
