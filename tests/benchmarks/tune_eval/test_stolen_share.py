"""benchmarks/tune_eval/stolen_share.py: the share a judging rule's "quiet" is read from."""

import json
from pathlib import Path

import pytest

from benchmarks.tune_eval import stolen_share


def results(path: Path, *loads: tuple[str, int, float | None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"runs": [
        {"placement": name, "load": {"concurrency": 4, "rate": None, "requests": n,
                                     "cpu_stolen_of_running": share}}
        for name, n, share in loads]}))


def test_the_share_is_weighted_by_requests_over_every_run_under_the_directory(tmp_path, capsys):
    results(tmp_path / "a" / "results.json", ("declared", 100, 0.02), ("split", 300, 0.10))
    results(tmp_path / "h2h" / "b" / "results.json", ("pick", 100, None))  # not recorded
    found = stolen_share.runs(tmp_path)
    assert [r["placement"] for r in found] == ["declared", "split", "pick"]
    assert stolen_share.weighted(found) == pytest.approx((2 + 30) / 400)  # unknown left out
    out = tmp_path / "stolen.json"
    assert stolen_share.main([str(tmp_path), "--write", str(out)]) == 0
    assert json.loads(out.read_text())["weighted_by_requests"] == pytest.approx(0.08)
    assert "weighted by requests: 8.0%" in capsys.readouterr().out


def test_a_directory_without_results_exits_2(tmp_path, capsys):
    assert stolen_share.main([str(tmp_path)]) == 2
    assert "no results.json" in capsys.readouterr().err
