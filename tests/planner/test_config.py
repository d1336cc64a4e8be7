"""The YAML schema: overlays on cards, complete pipelines, and every validation error."""

import re
import textwrap

import pytest

import planner
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
    (bad(s1_runtime={"resources": {"host_memory_mib": -5}}),
     ["stages[name=b].runtime.resources.host_memory_mib", "-5", "positive number of MiB"]),
    (bad(s1_runtime={"resources": {"host_memory_mib": "120"}}), ["host_memory_mib: 120"]),
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


def test_an_overlay_entry_for_an_unknown_stage_does_not_hide_the_other_entries():
    cfg = {"model": "qwen3-tts", "stages": [
        {"name": "vocoder", "gpu": -1},
        {"name": "tts_engine", "runtime": {"resources": {"total_gpu_memory_fraction": 7}}},
        {"name": "nope", "process": "x"}]}
    with pytest.raises(ConfigError) as err:
        load_pipeline(config=cfg)
    keys = [i.key for i in err.value.issues]
    assert keys == ["stages[2].name",
                    "stages[name=tts_engine].runtime.resources.total_gpu_memory_fraction",
                    "stages[name=vocoder].gpu"]


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


# -- malformed values are ConfigIssues naming file, key and what is allowed ----------------------
@pytest.mark.parametrize("text,where,allowed", [
    ("model: qwen3-tts\nstages:\n  - {name: vocoder, args: {1: a, b: c}}\n",
     "stages[name=vocoder].args", "keyword argument names are strings"),
    ("model: qwen3-tts\nname: [x]\n", "cfg.yaml: name", "a pipeline name uses"),
    ("model: qwen3-tts\nroles: {v: [a, b]}\n", "roles.v", "a role names one stage"),
    ("model: qwen3-tts\nstages:\n  - {name: {a: 1}}\n", "stages[0].name", "the name of one of"),
    ("model: ''\n", "cfg.yaml: model", "a card name, model path or architecture"),
    (b"model: qwen3-tts\nname: \xff\xfe\n", "cfg.yaml: is not UTF-8 text (byte 0xff on line 2",
     "save the file as UTF-8"),
    ("model: qwen3-tts\ndescription: 2001-13-01\n", "cfg.yaml: a value cannot be read",
     "quote values that only look like dates"),
])
def test_malformed_values_are_config_issues(tmp_path, text, where, allowed):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError) as err:
        load_pipeline(config=cfg)
    msg = err.value.paragraph()
    assert str(cfg) in msg and where in msg and allowed in msg, msg
    r = planner.solve(config=cfg)
    assert r.status == "error" and [d.code for d in r.diagnostics] == ["invalid-config"]
    assert "\n" not in r.diagnostics[0].message


@pytest.mark.parametrize("written,suggested,why", [
    ('"0.1"', "0.1", "it is quoted"),
    ("1e-1", "0.1", "exponent notation without a '.'"),
])
def test_fraction_written_as_a_string_says_how_to_write_it(tmp_path, written, suggested, why):
    # PyYAML follows YAML 1.1, where a float needs a '.': `1e-1` is a string. It is rejected with
    # a precise message rather than silently accepted as a number.
    cfg = write(tmp_path, f"""
        model: qwen3-tts
        stages:
          - {{name: vocoder, runtime: {{resources: {{total_gpu_memory_fraction: {written}}}}}}}
    """)
    with pytest.raises(ConfigError) as err:
        load_pipeline(config=cfg)
    msg = str(err.value)
    assert "stages[name=vocoder].runtime.resources.total_gpu_memory_fraction" in msg
    assert "got the string" in msg and why in msg and f"e.g. {suggested}" in msg, msg
    assert "outside (0, 1]" not in msg
    dotted = write(tmp_path, "model: qwen3-tts\nstages:\n  - {name: vocoder, runtime: "
                             "{resources: {total_gpu_memory_fraction: 1.0e-1}}}\n", "ok.yaml")
    assert load_pipeline(config=dotted).stage("vocoder").fraction == pytest.approx(0.1)


def test_errors_in_the_file_blame_its_key_and_flags_blame_the_flag(tmp_path):
    def paragraph(**kw):
        with pytest.raises(ConfigError) as err:
            load_pipeline(**kw)
        return err.value.paragraph()

    model = write(tmp_path, "model: nosuch\n", "model.yaml")
    assert paragraph(config=model).startswith(f"{model}: model: no built-in model card matches")
    assert "--model-path" not in paragraph(config=model)
    variant = write(tmp_path, "model: qwen3-tts\nvariant: nosuch\n", "variant.yaml")
    assert paragraph(config=variant).startswith(f"{variant}: variant: model card 'qwen3-tts'")
    assert "--variant" not in paragraph(config=variant)
    # Flags typed on the command line still blame the flag.
    assert paragraph(model_path="nosuch").startswith("--model-path: no built-in model card")
    assert paragraph(config=variant, variant="tp9").startswith("--variant: model card")


def test_a_non_string_process_is_one_issue():
    with pytest.raises(ConfigError) as err:
        load_pipeline(config={"model": "qwen3-tts", "stages": [{"name": "vocoder", "process": 5}]})
    assert len(err.value.issues) == 1, err.value.paragraph()
    issue = err.value.issues[0]
    assert issue.key == "stages[name=vocoder].process" and "got 5" in issue.problem
    assert "quote a number to use it as a name, e.g. '5'" in issue.allowed


@pytest.mark.parametrize("cfg,key", [
    (bad(s0_name='a"b'), "stages[0].name"),
    (bad(s0_name="a\\b"), "stages[0].name"),
    (bad(s0_name="a\nb"), "stages[0].name"),
    (bad(s0_name="a b"), "stages[0].name"),
    (bad(s0_name="-a"), "stages[0].name"),
    (bad(s0_process="p q"), "stages[name=a].process"),
    (bad(s0_process='p"'), "stages[name=a].process"),
    (bad(roles={"voc\\oder": "b"}), "roles.'voc\\\\oder'"),
    (bad(name="my pipeline"), "<config>: name"),
])
def test_names_outside_the_safe_set_are_rejected(cfg, key):
    with pytest.raises(ConfigError) as err:
        load_pipeline(config=cfg)
    msg = err.value.paragraph()
    assert key in msg and "is not a valid name" in msg and "ASCII letters, digits" in msg, msg
    # Names the built-in cards use, and process names holding '=' (STAGE=PROCESS splits at the
    # first '='), stay valid.
    ok = bad(s0_name="tts_engine.v2-a", s1_process="ming_tts_aux=1")
    ok["stages"][0]["next"] = "b"
    assert load_pipeline(config=ok).stage("b").process == "ming_tts_aux=1"


def test_dot_output_stays_well_formed_for_any_name():
    # Defence in depth: a Pipeline built in Python skips the config layer's name check.
    from planner.api import solve_pipeline
    from planner.pipeline import Pipeline, StageConfig
    from planner.render.dot import plan_dot

    a, b, c = 'a"b', "c\\", "d\ne"
    pl = Pipeline(name='m"x\\', variant="default", stages=(
        StageConfig(name=a, process="p\\", gpus=(), next=(b,)),
        StageConfig(name=b, process='q"\n', gpus=(), next=(c,)),
        StageConfig(name=c, process='q"\n', gpus=(), terminal=True)),
        process_safe_edges=frozenset({(a, b), (b, c)}))
    r = solve_pipeline(pl)
    dot = plan_dot(r.plan, pl)
    quoted = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
    unescape = {'\\"': '"', "\\n": "\n", "\\\\": "\\"}
    strings = [re.sub(r"\\.", lambda m: unescape[m.group(0)], m.group(1))
               for m in quoted.finditer(dot)]
    for line in dot.splitlines():
        bare = quoted.sub("", line)  # outside quoted strings: no stray quote or backslash
        assert '"' not in bare and "\\" not in bare, line
    # Every statement on a line of its own: header 3, cluster p 4, cluster q 5, 2 edges, "}".
    assert len(dot.splitlines()) == 3 + 4 + 5 + 2 + 1, dot
    assert {'m"x\\', a, b, c, 'p\\ (CPU)', 'q"\n (CPU)'} <= set(strings), strings


@pytest.mark.parametrize("cfg,needle", [
    ({"model": "qwen3-tts", "stages": [{"name": "vocoder", "process": "a"},
                                       {"name": "vocoder", "process": "b"}]},
     "stages[1].name: stage 'vocoder' is already changed by stages[0]"),
    ({"model": "qwen3-tts", "fused_stages": [["vocoder", "vocoder"]]},
     "fused_stages[0]: names stage 'vocoder' twice"),
    ({"name": "x", "stages": [{"name": "a", "process": "p", "next": "b"},
                              {"name": "b", "process": "p"}, {"name": "a", "process": "q"}]},
     "stages[2].name: duplicate stage name 'a'"),
    ({"model": "qwen3-tts", "process_safe_edges": [["tts_engine", "vocoder"]] * 2},
     "process_safe_edges[1]: tts_engine -> vocoder is listed twice"),
    ({"model": "qwen3-tts", "process_edge_resources": [
        {"edge": ["tts_engine", "vocoder"], "fractions": {"vocoder": 0.1}},
        {"edge": ["tts_engine", "vocoder"], "fractions": {"vocoder": 0.2}}]},
     "process_edge_resources[1].edge: tts_engine -> vocoder is listed twice"),
    ("model: qwen3-tts\nstages:\n  - name: vocoder\n    process: a\n    process: b\n",
     "key 'process' is given twice at line 5"),
])
def test_duplicates_are_rejected(tmp_path, cfg, needle):
    if isinstance(cfg, str):
        cfg = write(tmp_path, cfg)
    with pytest.raises(ConfigError) as err:
        load_pipeline(config=cfg)
    assert needle in err.value.paragraph(), err.value.paragraph()


def test_api_rejects_a_bare_string_where_a_list_of_requests_is_expected():
    for kw in ({"isolate_stages": "vocoder"}, {"stage_processes": "vocoder=v"},
               {"stage_processes": [b"vocoder=v"]}):
        with pytest.raises(TypeError, match="must be a list of strings"):
            planner.solve("qwen3-tts", **kw)
    assert planner.solve("qwen3-tts", isolate_stages=("vocoder",)).ok
