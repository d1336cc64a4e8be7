"""The YAML schema: overlays on cards, complete pipelines, and every validation error."""

import textwrap

import pytest

from planner.cards import load_pipeline
from planner.errors import ConfigError


def write(tmp_path, text, name="cfg.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


MINIMAL = {
    "name": "mini",
    "stages": [
        {"name": "a", "process": "p", "next": "b"},
        {"name": "b", "process": "p", "gpu": 0, "terminal": True},
    ],
}


def test_overlay_changes_only_the_given_fields(tmp_path):
    cfg = write(tmp_path, """
        model: qwen3-tts
        stages:
          - name: vocoder
            process: vocoder
    """)
    p = load_pipeline(config=cfg)
    v = p.stage("vocoder")
    assert (v.process, v.gpus, v.factory) == ("vocoder", (0,), "launcher.standins:vocoder")
    assert p.stage("tts_engine").process == "pipeline"
    assert p.process_safe_edges == load_pipeline("qwen3-tts").process_safe_edges


def test_overlay_deep_merges_runtime_and_keeps_process(tmp_path):
    cfg = write(tmp_path, """
        model: Qwen/Qwen3-TTS-12Hz-0.6B-Base
        stages:
          - {name: vocoder, runtime: {resources: {total_gpu_memory_fraction: 0.2}}}
    """)
    p = load_pipeline(config=cfg)
    assert p.stage("vocoder").fraction == 0.2 and p.stage("vocoder").process == "pipeline"


def test_overlay_on_model_path_without_model_key():
    p = load_pipeline(model_path="higgs-tts", config={"stages": [{"name": "vocoder", "process": "pipeline"}]})
    assert p.stage("vocoder").process == "pipeline"


def test_overlay_variant_from_file(tmp_path):
    cfg = write(tmp_path, "model: zonos2\nvariant: multi-gpu\n")
    assert load_pipeline(config=cfg).stage("vocoder").gpus == (1,)


def test_complete_pipeline_dict():
    p = load_pipeline(config=MINIMAL)
    assert p.name == "mini" and p.stage_names == ("a", "b")
    assert p.handoffs() == {("a", "b"): ("next",)}


def test_overlay_unknown_stage_lists_card_stages(tmp_path):
    cfg = write(tmp_path, "model: qwen3-tts\nstages:\n  - {name: vocodr, process: v}\n")
    with pytest.raises(ConfigError) as err:
        load_pipeline(config=cfg)
    msg = str(err.value)
    assert "cfg.yaml" in msg and "'vocodr'" in msg and "preprocessing, tts_engine, vocoder" in msg


def bad(**changes):
    cfg = {"name": "mini", "stages": [dict(s) for s in MINIMAL["stages"]]}
    for k, v in changes.items():
        if k.startswith("s0_"):
            cfg["stages"][0][k[3:]] = v
        elif k.startswith("s1_"):
            cfg["stages"][1][k[3:]] = v
        else:
            cfg[k] = v
    return cfg


@pytest.mark.parametrize("cfg,needles", [
    (bad(colour="red"), ["<config>: colour", "unknown key", "allowed keys"]),
    (bad(s0_colour="red"), ["stages[name=a].colour", "unknown key"]),
    ({"name": "x", "stages": [{"name": "a", "process": "p"}, {"name": "a", "process": "p"}]},
     ["duplicate stage name 'a'"]),
    (bad(s0_next="zz"), ["stages[name=a].next", "unknown stage 'zz'"]),
    (bad(s1_wait_for=["zz"]), ["stages[name=b].wait_for", "'zz'"]),
    (bad(s1_terminal=False, s1_next="a"), ["cycle", "a -> b -> a"]),
    ({"name": "x", "stages": [{"name": "a", "gpu": 0}]}, ["stages[name=a].process", "missing"]),
    (bad(s1_runtime={"resources": {"total_gpu_memory_fraction": 1.5}}),
     ["total_gpu_memory_fraction", "1.5", "outside (0, 1]"]),
    (bad(s1_runtime={"resources": {"total_gpu_memory_fraction": 0}}), ["outside (0, 1]"]),
    (bad(s1_gpu=[0], s1_tp_size=2), ["lists 1 GPU ids but tp_size is 2"]),
    (bad(s1_gpu=[0, 0], s1_tp_size=2), ["repeats a GPU id"]),
    (bad(s1_gpu=0, s1_tp_size=2), ["single gpu 0", "one GPU id per rank"]),
    (bad(process_edge_resources=[{"edge": ["a", "b"], "fractions": {"zz": 0.1}}]),
     ["recommendation names unknown stage 'zz'"]),
    (bad(process_safe_edges=[["b", "a"]]), ["b -> a is not a handoff"]),
    (bad(process_safe_edges=[["a", "zz"]]), ["unknown stage 'zz'"]),
    (bad(roles={"vocoder": "zz"}), ["roles.vocoder", "'zz'"]),
    (bad(placement={"max_total_gpu_memory_fraction_per_gpu": 2}), ["outside (0, 1]"]),
    (bad(placement={"require_memory_fraction_for_colocation": "yes"}), ["true or false"]),
    (bad(fused_stages=[["a"]]), ["two or more stages"]),
    (bad(s0_gpu=1, fused_stages=[["a", "b"]]), ["fuses stages on GPUs [0, 1]"]),
    (bad(s0_terminal=True), ["both next and terminal"]),
    (bad(s0_factory="nocolon"), ["module:callable"]),
    (bad(unsupported_edges=[{"edge": ["a", "b"]}], process_safe_edges=[["a", "b"]]),
     ["also listed in process_safe_edges"]),
    ({"stages": MINIMAL["stages"]}, ["needs a name"]),
])
def test_validation_errors_name_the_culprit(cfg, needles):
    with pytest.raises(ConfigError) as err:
        load_pipeline(config=cfg)
    msg = str(err.value)
    for n in needles:
        assert n in msg, msg


def test_every_issue_is_reported_at_once():
    cfg = bad(s0_colour="red", s1_runtime={"resources": {"total_gpu_memory_fraction": 2}})
    with pytest.raises(ConfigError) as err:
        load_pipeline(config=cfg)
    assert len(err.value.issues) == 2


def test_malformed_yaml_names_the_line(tmp_path):
    cfg = write(tmp_path, "model: qwen3-tts\nstages:\n  - name: vocoder\n    process: [unclosed\n")
    with pytest.raises(ConfigError, match=r"cfg.yaml: malformed YAML at line \d+"):
        load_pipeline(config=cfg)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_pipeline(config=tmp_path / "nope.yaml")


def test_top_level_must_be_mapping(tmp_path):
    with pytest.raises(ConfigError, match="top level is a list"):
        load_pipeline(config=write(tmp_path, "- a\n- b\n"))


def test_model_key_and_model_path_must_agree():
    with pytest.raises(ConfigError, match="selects card 'qwen3-tts' but --model-path selects"):
        load_pipeline(model_path="higgs-tts", config={"model": "qwen3-tts"})


def test_gpu_list_of_one_for_non_tp_is_that_gpu():
    cfg = bad(s1_gpu=[1])
    assert load_pipeline(config=cfg).stage("b").gpus == (1,)


def test_stream_and_next_to_same_target_are_one_handoff():
    cfg = bad(s0_stream_to=["b"])
    assert load_pipeline(config=cfg).handoffs() == {("a", "b"): ("next", "stream")}


def test_wait_for_adds_an_edge_into_the_stage():
    cfg = {"name": "x", "stages": [
        {"name": "a", "process": "p", "next": "c"}, {"name": "b", "process": "q"},
        {"name": "c", "process": "p", "wait_for": ["b"]}]}
    assert set(load_pipeline(config=cfg).handoffs()) == {("a", "c"), ("b", "c")}
