"""Everything the planner shows, produced from its typed values: text tables and diagnostics
(`text`, rich), JSON (`dicts`), Graphviz (`dot`), flags (`flags`), YAML (`overlay`) and the
sentences of each conflict (`prose`). Nothing here decides; import the module you need."""
