"""`planner tune`: choose the placement for a workload from a measured profile."""
