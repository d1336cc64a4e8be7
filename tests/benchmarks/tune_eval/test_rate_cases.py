"""The rate cases' check that a served case still judges the planner: re-asked with the planner as
it is, a case whose recommendation changed says so, in the words a reader compares."""

import pytest

from benchmarks.tune_eval import rate_cases as rc


def answer(**rate_question):
    return {"rate_question": {"pick": None, "runner_up": None, "replicas": None,
                              **rate_question}}


def test_a_recommendation_is_worded_by_its_flags():
    pick = answer(pick={"flags": ["--isolate-stage", "s2"]}, runner_up={"flags": []})
    assert rc.recommended_flags(pick) == "pick --isolate-stage s2, cheaper declared"
    pinned = answer(replicas={"count": 2, "flags": ["--isolate-stage vocoder",
                                                    "--process-cpus pipeline=1"]})
    assert rc.recommended_flags(pinned) == (
        "2 replicas of --isolate-stage vocoder --process-cpus pipeline=1")
    assert rc.recommended_flags(answer()) == "nothing"


@pytest.mark.slow  # nine rate questions asked (about 40 s on 2 cores)
def test_the_nine_served_rate_cases_are_what_tune_recommends_now(capsys, monkeypatch, saved_set,
                                                                 saved_root):
    # Their served runs judge the rate question only while it recommends the plans served.
    saved_set("2026-12-03-rates")  # the profiles and configs the cases were decided on
    cases = saved_set("2026-12-03-rates-stolen")
    monkeypatch.chdir(saved_root)  # the cases name their profiles from the repository's root
    changed = rc.ask(cases)
    out = capsys.readouterr().out
    assert out.count("the same") == 9, out
    assert changed == 0
