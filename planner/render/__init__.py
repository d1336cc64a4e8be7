"""Everything the planner shows of a plan, produced from its typed values: text tables and
diagnostics (`text`, rich), JSON (`dicts`), Graphviz (`dot`) and the sentences of each conflict
(`prose`). Nothing here decides; import the module you need. Flags are `planner.flags`; tune's
table and JSON are `planner.tune.report`."""
