"""How tune orders placements by their predicted score (no model run here)."""

from __future__ import annotations

from planner.tune.choose import TIE, rank


def test_the_higher_prediction_wins_when_the_model_can_tell_them_apart():
    # 100 against 90: far outside what the model resolves
    assert rank([90.0, 100.0], processes=[1, 3], declared=[True, False]) == [1, 0]


def test_predictions_closer_than_the_model_resolves_go_to_fewer_processes():
    almost = 100.0 * (1 - TIE / 2)
    assert rank([100.0, almost], processes=[3, 2], declared=[False, False]) == [1, 0]
    # and at equal processes to the declared topology (nothing to change)
    assert rank([100.0, almost], processes=[2, 2], declared=[False, True]) == [1, 0]


def test_ties_are_judged_against_the_best_left_so_a_chain_of_small_steps_does_not_win():
    # each 3/4 of a tie apart: the second ties with the best, the third (1.5 ties below) does not
    step = 100.0 * TIE * 0.75
    scores, procs = [100.0, 100.0 - step, 100.0 - 2 * step], [3, 2, 1]
    assert rank(scores, processes=procs, declared=[False, False, True]) == [1, 0, 2]


def test_lower_is_better_objectives_pass_negated_scores_and_tie_the_same_way():
    # p50 latency 200 ms against 202 ms (scores -200 and -202): a tie, fewer processes first
    assert 202 <= 200 * (1 + TIE)
    assert rank([-200.0, -202.0], processes=[2, 1], declared=[False, True]) == [1, 0]
    assert rank([-200.0, -260.0], processes=[2, 1], declared=[False, True]) == [0, 1]
