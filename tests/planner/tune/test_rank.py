"""How tune orders placements by their predicted score (no model run here)."""

from __future__ import annotations

from planner.tune.choose import (CROWDING_FLOOR, RESOLUTION, RETAKE_SHARE, TIE, RankKey,
                                 crowding_ms, rank)
from planner.tune.profile import HandoffCost, Profile, StageProfile


def ranked(scores, processes, declared, crowding=None, cores=2):
    """`rank` over candidates given column by column (score, processes, declared, crowding)."""
    crowding = crowding or [0.0] * len(scores)
    return rank([RankKey(s, p, d, c) for s, p, d, c in zip(scores, processes, declared, crowding)],
                cores)


def names_in_order(keys, cores=2):
    return [keys[i].name for i in rank(keys, cores)]


def test_the_higher_prediction_wins_when_the_model_can_tell_them_apart():
    # 100 against 90: far outside what the model resolves, whatever the tie rules prefer
    assert ranked([90.0, 100.0], processes=[1, 3], declared=[True, False]) == [1, 0]
    assert ranked([90.0, 100.0], processes=[2, 2], declared=[True, False],
                  crowding=[0.0, 50.0]) == [1, 0]


def test_a_tie_nothing_tells_apart_stays_in_predicted_order():
    # No rule settles it (fewer processes cost 20% on issue 26's pipeline): the higher prediction
    # first, and the output says it is a tie (tests/planner/tune/test_output.py)
    almost = 100.0 * (1 - TIE / 2)
    assert ranked([almost, 100.0], processes=[1, 2], declared=[True, False]) == [1, 0]
    assert ranked([100.0, almost], processes=[3, 1], declared=[False, True]) == [0, 1]


def test_exactly_equal_predictions_get_a_fixed_order_whatever_order_they_come_in():
    keys = [RankKey(50.0, 2, False, name="--isolate-stage b"),
            RankKey(50.0, 1, True, name="declared"),
            RankKey(50.0, 2, False, name="--isolate-stage a")]
    order = names_in_order(keys)
    assert order == ["declared", "--isolate-stage a", "--isolate-stage b"]
    assert names_in_order([keys[i] for i in (2, 0, 1)]) == order


def test_a_thread_the_model_predicts_no_gain_from_is_not_asked_for():
    # generated-81 at C=1: a second thread predicted 0.02% above one measured x0.899 of it
    def keys(threaded_score):
        return [RankKey(threaded_score, 1, False, name="--stage-threads s3=2", extra_threads=1),
                RankKey(100.0, 1, True, name="declared")]

    hair = 100.0 * (1 + RESOLUTION / 5)
    assert names_in_order(keys(hair)) == ["declared", "--stage-threads s3=2"]
    # a gain the model does resolve (still within TIE) keeps the thread first
    gain = 100.0 * (1 + 3 * RESOLUTION)
    assert names_in_order(keys(gain)) == ["--stage-threads s3=2", "declared"]


def test_a_tie_goes_to_the_placement_that_leaves_the_busiest_stage_alone():
    # qwen3-tts's case: the engine with the vocoder beside it, or alone; predicted equal
    almost = 100.0 * (1 - TIE / 2)
    assert ranked([100.0, almost], processes=[1, 2], declared=[True, False],
                  crowding=[101.0, 0.0], cores=2) == [1, 0]
    # on one core two processes take turns on it all the time: fewer processes again
    assert ranked([100.0, almost], processes=[1, 2], declared=[True, False],
                  crowding=[101.0, 0.0], cores=1) == [0, 1]


def test_three_processes_on_two_cores_can_win_a_tie_by_leaving_the_busiest_stage_alone():
    # four-mixed's case: the busiest stage alone in the third of three processes measured best
    almost = 100.0 * (1 - TIE / 2)
    assert ranked([almost, 100.0], processes=[3, 2], declared=[False, False],
                  crowding=[0.0, 3.1], cores=2) == [0, 1]
    # and with no company to spare it, the higher prediction
    assert ranked([100.0, almost], processes=[3, 2], declared=[False, False],
                  cores=2) == [0, 1]


def test_on_one_core_a_tie_never_goes_to_more_processes():
    # Qwen3-TTS's isolated vocoder on one core: 7-8% below one process, predicted equal
    almost = 100.0 * (1 - TIE / 2)
    assert ranked([100.0, almost], processes=[2, 1], declared=[False, True], cores=1) == [1, 0]
    # on two cores two processes are no cost the model misses: the higher prediction
    assert ranked([100.0, almost], processes=[2, 1], declared=[False, True], cores=2) == [0, 1]


def test_on_two_cores_copies_up_to_four_processes_win_a_tie_they_are_predicted_ahead_in():
    # generated-82 at C=4: s0 copied too (4 processes) predicted 78.3 against 78.0 for one s0
    # copy (3), and measured x1.06 of it head to head; the old rule (at least twice as many
    # processes as cores last) picked the 3
    names = ["--isolate-stage s0 --process-copies s0=2 --process-copies pipeline=2",
             "--isolate-stage s0 --process-copies pipeline=2"]
    assert names_in_order([RankKey(78.3, 4, False, name=names[0]),
                           RankKey(78.0, 3, False, name=names[1])]) == names
    # company for the busiest stage still settles such a tie, whatever the process count
    assert names_in_order([RankKey(78.3, 4, False, 2.6, names[0]),
                           RankKey(78.0, 3, False, name=names[1])]) == names[::-1]


def test_ties_are_judged_against_the_best_left_so_a_chain_of_small_steps_does_not_win():
    # each 3/4 of a tie apart: the second ties with the best, the third (1.5 ties below) does not
    step = 100.0 * TIE * 0.75
    scores, crowd = [100.0, 100.0 - step, 100.0 - 2 * step], [2.0, 1.0, 0.0]
    assert ranked(scores, processes=[2, 2, 2], declared=[False, False, True],
                  crowding=crowd) == [1, 0, 2]


def test_lower_is_better_objectives_pass_negated_scores_and_tie_the_same_way():
    # p50 latency 200 ms against 202 ms (scores -200 and -202): a tie, settled by company
    assert 202 <= 200 * (1 + TIE)
    assert ranked([-200.0, -202.0], processes=[2, 2], declared=[False, True],
                  crowding=[5.0, 0.0]) == [1, 0]
    assert ranked([-200.0, -260.0], processes=[2, 2], declared=[False, True],
                  crowding=[5.0, 0.0]) == [0, 1]


def _profile(stages, latency_ms=0.02):
    """stages: name -> (cpu ms, native call ms); all of it native work."""
    return Profile("m", "default", 2, "cpu", tuple(
        StageProfile(n, gil_ms=0.0, native_ms=cpu, device_ms=0.0, native_call_ms=call)
        for n, (cpu, call) in stages.items()), HandoffCost(latency_ms=latency_ms))


def test_crowding_is_the_cpu_work_beside_the_busiest_stage():
    # torch-like stages: native work in calls of 0.02 ms, a wake-up per re-take costs as much
    prof = _profile({"pre": (2.0, 0.02), "engine": (40.0, 0.02), "vocoder": (12.0, 0.02)})
    assert crowding_ms([["pre", "engine", "vocoder"]], prof) == 14.0
    assert crowding_ms([["pre", "engine"], ["vocoder"]], prof) == 0.0  # 2 < 10% of 40
    assert crowding_ms([["engine"], ["pre", "vocoder"]], prof) == 0.0
    assert crowding_ms([["engine", "vocoder"], ["pre"]], prof) == 12.0


def test_a_tiny_neighbour_is_no_crowding():
    prof = _profile({"engine": (40.0, 0.02), "pre": (40.0 * CROWDING_FLOOR * 0.99, 0.02)})
    assert crowding_ms([["engine", "pre"]], prof) == 0.0


def test_a_stage_that_rarely_retakes_the_lock_is_not_crowded():
    # the same work in calls of 5 ms: 8 re-takes per request, nothing a wake-up each can slow
    prof = _profile({"engine": (40.0, 5.0), "vocoder": (12.0, 5.0)})
    assert crowding_ms([["engine", "vocoder"]], prof) == 0.0


def test_the_retake_threshold_follows_the_machines_wakeup_latency():
    # 400 re-takes per request (0.1 ms calls): a wake-up of 0.001 ms each is 0.4 ms of 40, one of
    # 0.01 ms each is 4 ms
    stages = {"engine": (40.0, 0.1), "vocoder": (12.0, 0.1)}
    assert 400 * 0.001 < RETAKE_SHARE * 40.0 <= 400 * 0.01
    assert crowding_ms([["engine", "vocoder"]], _profile(stages, latency_ms=0.001)) == 0.0
    assert crowding_ms([["engine", "vocoder"]], _profile(stages, latency_ms=0.01)) == 12.0


def test_with_one_request_at_a_time_only_stages_running_at_once_crowd():
    prof = _profile({"pre": (2.0, 0.02), "engine": (40.0, 0.02), "vocoder": (12.0, 0.02)})
    # a plain chain: the engine runs alone whoever shares its process
    assert crowding_ms([["pre", "engine", "vocoder"]], prof, company=frozenset()) == 0.0
    # the engine streams to the vocoder: the vocoder runs beside it, preprocessing still not
    streaming = frozenset({"engine", "vocoder"})
    assert crowding_ms([["pre", "engine", "vocoder"]], prof, company=streaming) == 12.0
    # the busiest stage itself runs alone: nothing crowds it
    assert crowding_ms([["pre", "engine", "vocoder"]], prof,
                       company=frozenset({"pre", "vocoder"})) == 0.0


def test_pure_python_company_does_not_crowd():
    # The engine's neighbour runs pure Python: it holds the lock in long stretches, which the
    # model shares out itself, instead of meeting the engine at every re-take.
    prof = Profile("m", "default", 2, "cpu", (
        StageProfile("engine", gil_ms=0.0, native_ms=40.0, device_ms=0.0, native_call_ms=0.02),
        StageProfile("pre", gil_ms=12.0, native_ms=0.0, device_ms=0.0),
        StageProfile("vocoder", gil_ms=2.0, native_ms=10.0, device_ms=0.0, native_call_ms=0.02)),
        HandoffCost(latency_ms=0.02))
    assert crowding_ms([["pre", "engine"], ["vocoder"]], prof) == 0.0
    assert crowding_ms([["pre", "engine", "vocoder"]], prof) == 10.0  # the vocoder's native work
