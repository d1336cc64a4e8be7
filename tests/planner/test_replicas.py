"""Packing replicas onto a cluster: `max` matches brute force on small clusters, too many replicas
is an `insufficient-capacity` diagnostic whose hints fit, and the output says where each goes."""

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import planner
from planner.api import solve_replicas
from planner.cluster import Cluster, Node, load_cluster
from planner.errors import ConfigError
from planner.replicas import Demand, pack
from tests.cli import BOTH, run_planner


def two_gpu_pipeline(f0, f1):
    """A replica using logical GPUs 0 and 1 with the given fractions (None: undeclared)."""
    def stage(name, gpu, frac, **kw):
        s = {"name": name, "process": f"p{gpu}", "gpu": gpu, **kw}
        if frac is not None:
            s["runtime"] = {"resources": {"total_gpu_memory_fraction": frac}}
        return s
    stages = [stage("a", 0, f0, next="b"), stage("b", 1, f1, terminal=True)]
    return planner.load(config={"name": "two", "stages": stages,
                                "process_safe_edges": [["a", "b"]]})


def brute_force_most(demand: Demand, gpus: int) -> int:
    """Most replicas on one node, by trying every injective logical -> physical map per replica."""
    maps = list(itertools.permutations(range(gpus), len(demand.gpus)))
    best = 0
    # No more than the node's whole GPU capacity over one replica's total use (the search stops
    # there: it was once a fixed 12, below the 15 replicas of 0.1 + 0.1 that fit on 3 GPUs).
    cap = gpus * demand.limit // max(1, sum(d for _, d in demand.gpus))

    def go(k, loads, start):
        nonlocal best
        best = max(best, k)
        if k == cap:
            return
        for i in range(start, len(maps)):  # replicas are interchangeable: maps in order
            new = list(loads)
            for (_, d), g in zip(demand.gpus, maps[i]):
                new[g] += d
            if all(x <= demand.limit for x in new):
                go(k + 1, new, i)

    go(0, [0] * gpus, 0)
    return best


@settings(max_examples=40, deadline=None)
@given(f0=st.sampled_from([0.1, 0.25, 0.3, 0.45, 0.5, 0.6, 0.9, None]),
       f1=st.sampled_from([0.1, 0.2, 0.35, 0.5, 0.7, None]),
       gpus=st.lists(st.integers(1, 3), min_size=1, max_size=3),
       cpus=st.sampled_from([None, 2, 4, 7]))
def test_max_matches_brute_force(f0, f1, gpus, cpus):
    r = planner.solve_pipeline(two_gpu_pipeline(f0, f1))
    assert r.ok
    cluster = Cluster(tuple(Node(f"n{i}", g, cpus) for i, g in enumerate(gpus)))
    p = pack(r.plan, cluster, None)
    demand = Demand.of(r.plan)
    expected = sum(min(brute_force_most(demand, g), cpus // demand.cpus if cpus else 99)
                   for g in gpus)
    assert p.most == expected and p.proved
    assert len(p.replicas) == expected
    for load in p.loads:  # no GPU over its limit, and every replica's GPUs are distinct
        assert load.total <= load.limit + 1e-9
    for rep in p.replicas:
        assert len({g for _, g in rep.gpus}) == len(rep.gpus)


def test_too_many_replicas_is_explained_and_both_hints_fit():
    cluster = Cluster((Node("a", 4, 32), Node("b", 2, 8)), source="two nodes")
    pl = planner.load("qwen3-tts")
    ask = [planner.Isolate("vocoder")]
    r = solve_replicas(pl, cluster, 8, requests=ask)
    assert r.status == "infeasible" and r.exit_code == 1
    d = r.diagnostics[-1]
    assert d.code == "insufficient-capacity" and "at most 6" in d.message
    assert any("0.950 of a GPU" in b for b in d.because)
    assert "--replicas 6" in d.hint
    assert solve_replicas(pl, cluster, 6, requests=ask).ok
    # The fraction hint, applied as YAML, lets two replicas share a GPU: 8 now fit.
    overlay = {"model": "qwen3-tts", **d.fix.config}
    again = solve_replicas(planner.load(config=overlay), cluster, 8, requests=ask)
    assert again.ok and any(len(g.replicas) == 2 for g in again.packing.loads)


def test_single_replica_diagnostics_come_first_and_stop_packing():
    cluster = Cluster((Node("a", 1, 4),))
    r = solve_replicas(planner.load("qwen3-tts"), cluster, 3,
                       requests=[planner.Isolate("preprocessing")])
    assert [d.code for d in r.diagnostics] == ["unsupported-handoff"]


def test_cpus_can_be_what_runs_out():
    cluster = Cluster((Node("a", 8, 4),), source="c")
    r = solve_replicas(planner.load("higgs-tts"), cluster, 3)  # 3 processes a replica
    d = r.diagnostics[-1]
    assert "at most 1" in d.message and any("CPUs run out first" in b for b in d.because)


def test_pack_fills_nodes_and_spread_evens_them():
    cluster = Cluster(tuple(Node(f"n{i}", 4, None) for i in range(3)))
    plan = planner.solve("qwen3-tts").plan
    packed = pack(plan, cluster, 4, "pack")
    assert {r.node for r in packed.replicas} == {"n0"}
    spread = pack(plan, cluster, 4, "spread")
    assert sorted(sum(r.node == n.name for r in spread.replicas) for n in cluster.nodes) == [1, 1, 2]


@pytest.mark.parametrize("mode", BOTH)
def test_cli_json_and_cluster_file_errors(tmp_path, mode):
    good = tmp_path / "c.yaml"
    good.write_text("nodes:\n  - {name: a, gpus: 2, cpus: 16}\n  - {name: b, gpus: 2}\n")
    out = run_planner("solve", "qwen3-tts", "--cluster", str(good), "--replicas", "max",
                      "--format", "json", in_process=mode == "in-process")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["replicas_max"] == 4 and data["replicas_max_proved"] is True
    assert data["replicas"][0] == {"index": 0, "node": "a", "gpus": {"0": 0}}
    # qwen3-tts declares no fraction: a replica takes its GPU whole.
    assert {"node": "a", "id": 0, "total": 1.0, "limit": 1.0, "replicas": [0]} in \
        data["cluster"]["gpus"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes:\n  - {name: a, gpus: -1}\n  - {name: a, gpus: 2}\n")
    out = run_planner("solve", "qwen3-tts", "--cluster", str(bad), "--replicas", "2",
                      in_process=mode == "in-process")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "nodes[0].gpus" in out.stdout + out.stderr
    with pytest.raises(ConfigError, match="--cluster: .*missing.yaml is not a file"):
        load_cluster(tmp_path / "missing.yaml")


def test_a_ray_clusters_live_nodes_become_the_cluster_in_node_id_order():
    """The records `ray.nodes()` lists, read without Ray: dead nodes are left out, each node keeps
    its Ray id (where `serve --backend ray` pins its replicas), and the size limits apply."""
    records = [
        {"NodeID": "ffff01", "Alive": True, "NodeName": "10.0.0.2",
         "Resources": {"GPU": 2.0, "CPU": 16.0}},
        {"NodeID": "aaaa02", "Alive": True, "NodeName": "10.0.0.1", "Resources": {"CPU": 8.0}},
        {"NodeID": "bbbb03", "Alive": False, "NodeName": "10.0.0.3", "Resources": {"GPU": 8.0}},
    ]
    cluster = planner.cluster_from_ray_nodes(records)
    assert cluster.source == "ray"
    assert [(n.name, n.gpus, n.cpus, n.ray_id) for n in cluster.nodes] == [
        ("10.0.0.1-aaaa02", 0, 8, "aaaa02"), ("10.0.0.2-ffff01", 2, 16, "ffff01")]
    with pytest.raises(ConfigError, match="at most 64 a node"):
        planner.cluster_from_ray_nodes([{"NodeID": "n1", "Alive": True,
                                         "Resources": {"GPU": 100.0}}])


def test_the_planner_core_does_not_join_a_ray_cluster():
    with pytest.raises(ConfigError, match="launcher.cluster_from_ray"):
        load_cluster("ray")


def test_on_a_cluster_without_gpus_replicas_are_limited_by_cpus_alone():
    """What `planner serve` packs on a machine without GPUs, where GPU stages run on CPU."""
    pl = planner.load_pipeline(model_path="higgs-tts")  # 3 processes sharing logical GPU 0
    laptop = Cluster((Node("laptop", 0, 8),))
    # `planner solve` counts as `planner serve` does: no GPU at all, GPU stages on CPU.
    assert solve_replicas(pl, laptop, 2).packing == solve_replicas(pl, laptop, 2, gpus=False).packing
    fits = solve_replicas(pl, laptop, 2, gpus=False)
    assert fits.ok and [r.gpus for r in fits.packing.replicas] == [(), ()]
    too_many = solve_replicas(pl, laptop, 3, gpus=False)
    assert [d.code for d in too_many.diagnostics] == ["insufficient-capacity"]
    assert too_many.packing.most == 2  # 8 CPUs // 3 processes
    assert "--replicas 2" in too_many.diagnostics[0].hint


def test_solve_and_serve_give_one_capacity_answer_on_a_machine_without_gpus(monkeypatch, capsys):
    """`planner solve --replicas` and `planner serve --replicas` on this machine, with no GPU
    visible: the same count (by CPUs), the same refusal, exit 1, nothing started."""
    # serve says its extra is missing before it reads --replicas
    pytest.importorskip("launcher.serving.serve", reason="needs the serve extra "
                        "(pip install -e '.[serve]') for `planner serve`")
    from planner.app.cli import main
    from planner.cluster import this_machine

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    cpus = this_machine().nodes[0].cpus
    assert main(["solve", "qwen3-tts", "--replicas", str(cpus)]) == 0  # one CPU a replica
    too_many = str(cpus + 1)
    capsys.readouterr()
    assert main(["solve", "qwen3-tts", "--replicas", too_many]) == 1
    solved = " ".join(capsys.readouterr().out.split())
    assert main(["serve", "qwen3-tts", "--replicas", too_many, "--port", "0"]) == 1
    served = " ".join(capsys.readouterr().err.split())
    verdict = f"{too_many} replicas of qwen3-tts do not fit on this machine: at most {cpus} do."
    assert verdict in solved and verdict in served
    # The CPUs ran out, and it says so (not that GPUs did).
    assert "Its CPUs run out first" in solved and "GPUs run out" not in solved


@pytest.mark.parametrize("mode", BOTH)
def test_replicas_max_that_fits_none_exits_1_with_the_explanation(tmp_path, mode):
    path = tmp_path / "c.yaml"
    path.write_text("nodes:\n  - {name: a, gpus: 1, cpus: 2}\n  - {name: b, gpus: 1, cpus: 1}\n")
    out = run_planner("solve", "higgs-tts", "--cluster", str(path), "--replicas", "max",
                      in_process=mode == "in-process")
    assert out.returncode == 1, out.stdout + out.stderr
    text = " ".join(out.stdout.split())
    assert "No replica of higgs-tts fits on" in text
    assert "needs 3 CPUs (one per process)" in text
    assert "Its CPUs run out first (2 CPUs, 3 a replica)." in text
    assert "hint: add nodes" in text


def test_the_capacity_explanation_is_short_sentences_with_right_plurals():
    # One node with too few GPUs for a two-GPU replica, one with too few CPUs.
    r = solve_replicas(planner.load("ming-omni-tts", variant="tp2"),
                       Cluster((Node("a", 1, 64), Node("b", 4, 1)), source="two nodes"), 1)
    d = r.diagnostics[-1]
    assert d.message == "1 replica of ming-omni-tts does not fit on two nodes: at most 0 do"
    assert d.because[0] == ("One replica of ming-omni-tts needs 4 CPUs (one per process). It needs "
                            "0.920 of a GPU (logical GPU 0) and 0.720 of a GPU (logical GPU 1).")
    assert "1 node (a) with 1 GPU and 64 CPUs: holds at most 0 replicas. A replica needs 2 GPUs " \
        "on one node." in d.because
    assert any(b.startswith("1 node (b) with 4 GPUs and 1 CPU: holds at most 0 replicas. Its "
                            "CPUs run out first (1 CPU, ") for b in d.because)
    # Short sentences: none runs on past 25 words.
    assert all(len(sentence.split()) <= 25 for b in d.because for sentence in b.split(". "))


def test_a_cluster_file_names_every_problem_of_a_node_at_once(tmp_path):
    bad = tmp_path / "nodes.yaml"
    bad.write_text("nodes:\n  - {name: 'a b', gpus: -1, cpus: 0}\n  - {name: c, gpus: 2}\n")
    with pytest.raises(ConfigError) as err:
        load_cluster(bad)
    text = str(err.value)
    # The bad name did not hide the node's GPU and CPU counts (one edit fixes all three).
    for field in ("nodes[0].name", "nodes[0].gpus", "nodes[0].cpus"):
        assert field in text, text
    assert "nodes[1]" not in text
