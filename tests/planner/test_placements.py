"""`planner.feasible_placements`: every partition the rules accept, checked against a brute-force
enumeration of partitions judged by the plain-Python oracle."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import planner
from planner.placements import block_names, set_partitions
from tests.lanes import examples
from tests.planner.oracle import judge
from tests.planner.test_properties import valid_cases

BELL = [1, 1, 2, 5, 15, 52, 203]


@pytest.mark.parametrize("n", range(len(BELL)))
def test_set_partitions_counts_and_covers(n):
    items = [f"s{i}" for i in range(n)]
    parts = list(set_partitions(items))
    assert len(parts) == BELL[n]
    assert len({frozenset(map(frozenset, p)) for p in parts}) == BELL[n]
    for p in parts:
        assert sorted(x for block in p for x in block) == sorted(items)
    if n:
        assert parts[0] == (tuple(items),) and parts[-1] == tuple((x,) for x in items)


def test_block_names_keep_declared_names_and_stay_unique():
    pipeline = planner.load("qwen3-tts")
    assert block_names(pipeline, [("preprocessing", "tts_engine"), ("vocoder",)]) == [
        "pipeline", "vocoder"]
    assert block_names(pipeline, [("preprocessing",), ("tts_engine",), ("vocoder",)]) == [
        "pipeline", "tts_engine", "vocoder"]


def _partition(plan):
    return frozenset(frozenset(g.stages) for g in plan.groups)


def brute_force(pipeline):
    """Every partition of the non-TP stages (fused members may land apart: the oracle rejects
    those) that the oracle accepts, as the requests that ask for it."""
    movable = [s.name for s in pipeline.stages if not s.is_tp]
    out = set()
    for blocks in set_partitions(movable):
        assign = [f"{s}={'_'.join(b)}" for b in blocks for s in b]
        if judge(pipeline, (), assign).status == "ok":
            out.add(frozenset(frozenset(b) for b in blocks))
    return out


def _matches_brute_force(data):
    _, pipeline, _, _ = data.draw(valid_cases())
    found = planner.feasible_placements(pipeline)
    assert len({_partition(f.plan) for f in found}) == len(found)
    assert {_partition(f.plan) for f in found} == brute_force(pipeline)
    for f in found:  # the requests reproduce the plan
        again = planner.solve_pipeline(pipeline, requests=f.requests)
        assert again.ok and again.plan == f.plan


# Each example enumerates up to 203 partitions through the oracle (up to 0.7 s): a sample in the
# fast lane, a larger one otherwise (tests/lanes.py): 30 draws, over twice the fast lane's, where
# 60 cost the full suite 16 s.
@settings(max_examples=examples(30, 12), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_feasible_placements_match_brute_force_enumeration(data):
    _matches_brute_force(data)


@pytest.mark.parametrize("card", [c.name for c in planner.all_cards()])
def test_every_card_enumerates_its_declared_topology_first_among_equals(card):
    pipeline = planner.load(card)
    found = planner.feasible_placements(pipeline)
    declared = _partition(planner.declared_plan(pipeline))
    assert declared in {_partition(f.plan) for f in found}
    assert len(planner.feasible_placements(pipeline, limit=1)) == 1


def test_too_many_units_is_an_error_that_says_so():
    cfg = {"name": "long", "stages": [
        {"name": f"s{i}", "process": "p", **({"next": f"s{i + 1}"} if i < 9 else {})}
        for i in range(10)], "process_safe_edges": [[f"s{i}", f"s{i + 1}"] for i in range(9)]}
    with pytest.raises(planner.TooManyPlacements, match="10 movable stages"):
        planner.feasible_placements(planner.load(config=cfg))


def test_the_public_functions_on_a_pipeline_take_a_model_name_as_solve_does():
    by_name = planner.feasible_placements("qwen3-tts")
    assert [f.plan for f in by_name] == [f.plan for f in planner.feasible_placements(
        planner.load("qwen3-tts"))]
    assert planner.declared_plan("ming-omni-tts", variant="tp2") == planner.declared_plan(
        planner.load("ming-omni-tts", variant="tp2"))
    with pytest.raises(TypeError, match="a model name such as 'qwen3-tts' or a Pipeline"):
        planner.feasible_placements(3)
    with pytest.raises(planner.ConfigError):
        planner.feasible_placements("no-such-model")
