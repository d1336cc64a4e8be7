"""Every built-in card matches the facts of the specification's models.md, row by row."""

from importlib import resources
from pathlib import Path

import pytest

from planner import card_mirror, cards
from planner.cards import MIRROR, all_cards, find_card, load_pipeline
from planner.errors import ConfigError
from planner.graph import build_graph
from planner.topology import declared_baseline

CPU = None
# card, variant: stages as (name, process, gpu, fraction), handoffs, safe edges, recommendations, roles
SPEC = {
    ("higgs-tts", "default"): dict(
        stages=[("preprocessing", "tts_frontend", CPU, None), ("audio_encoder", "tts_frontend", 0, 0.03),
                ("tts_engine", "pipeline", 0, 0.85), ("vocoder", "vocoder", 0, 0.10)],
        edges={("preprocessing", "audio_encoder"): ("next",), ("audio_encoder", "tts_engine"): ("next",),
               ("tts_engine", "vocoder"): ("next", "stream")},
        safe={("preprocessing", "audio_encoder"), ("audio_encoder", "tts_engine"), ("tts_engine", "vocoder")},
        recs={}, roles={}),
    ("fishaudio-s2-pro", "default"): dict(
        stages=[("preprocessing", "preprocessing", CPU, None), ("tts_engine", "pipeline", 0, None),
                ("vocoder", "pipeline", 0, None)],
        edges={("preprocessing", "tts_engine"): ("next",), ("tts_engine", "vocoder"): ("next", "stream")},
        safe={("preprocessing", "tts_engine"), ("tts_engine", "vocoder")},
        recs={("tts_engine", "vocoder"): {"tts_engine": 0.85, "vocoder": 0.10}}, roles={}),
    ("voxtral-tts", "default"): dict(
        stages=[("preprocessing", "pipeline", CPU, None), ("tts_generation", "pipeline", 0, None),
                ("vocoder", "pipeline", 0, None)],
        edges={("preprocessing", "tts_generation"): ("next",), ("tts_generation", "vocoder"): ("next",)},
        safe={("tts_generation", "vocoder")},
        recs={("tts_generation", "vocoder"): {"tts_generation": 0.85, "vocoder": 0.10}}, roles={}),
    ("ming-omni-tts", "default"): dict(
        stages=[("preprocessing", "pipeline", CPU, None), ("reference_encode", "pipeline", 0, None),
                ("tts_engine", "pipeline", 0, None), ("audio_decode", "pipeline", 0, None)],
        edges={("preprocessing", "reference_encode"): ("next",), ("reference_encode", "tts_engine"): ("next",),
               ("tts_engine", "audio_decode"): ("next",)},
        safe={("tts_engine", "audio_decode")},
        recs={("tts_engine", "audio_decode"): {"reference_encode": 0.08, "tts_engine": 0.72,
                                               "audio_decode": 0.12}},
        roles={"vocoder": "audio_decode"}),
    ("ming-omni-tts", "tp2"): dict(
        stages=[("preprocessing", "preprocessing", CPU, None), ("reference_encode", "ming_tts_aux", 0, 0.08),
                ("tts_engine", "tts_engine", [0, 1], 0.72), ("audio_decode", "ming_tts_aux", 0, 0.12)],
        edges={("preprocessing", "reference_encode"): ("next",), ("reference_encode", "tts_engine"): ("next",),
               ("tts_engine", "audio_decode"): ("next",)},
        # The documented layout splits preprocessing -> reference_encode; with a one-process-per-
        # rank engine the prepared request travels in the payload, so that handoff is safe here.
        safe={("preprocessing", "reference_encode"), ("tts_engine", "audio_decode")},
        recs={("tts_engine", "audio_decode"): {"reference_encode": 0.08, "tts_engine": 0.72,
                                               "audio_decode": 0.12}},
        roles={"vocoder": "audio_decode"}),
    ("moss-tts-local", "default"): dict(
        stages=[("preprocessing", "pipeline", 0, 0.15), ("tts_engine", "pipeline", 0, 0.67),
                ("vocoder", "vocoder", 0, 0.18)],
        edges={("preprocessing", "tts_engine"): ("next",), ("tts_engine", "vocoder"): ("next", "stream")},
        safe={("tts_engine", "vocoder")},
        recs={("tts_engine", "vocoder"): {"preprocessing": 0.15, "tts_engine": 0.67, "vocoder": 0.18}},
        roles={}),
    ("moss-tts-local", "split"): dict(
        stages=[("preprocessing", "pipeline", 0, None), ("tts_engine", "pipeline", 0, None),
                ("vocoder", "pipeline", 0, None)],
        edges={("preprocessing", "tts_engine"): ("next",), ("tts_engine", "vocoder"): ("next", "stream")},
        safe=set(), recs={}, roles={}),
    ("qwen3-tts", "default"): dict(
        stages=[("preprocessing", "pipeline", CPU, None), ("tts_engine", "pipeline", 0, None),
                ("vocoder", "pipeline", 0, None)],
        edges={("preprocessing", "tts_engine"): ("next",), ("tts_engine", "vocoder"): ("next", "stream")},
        safe={("tts_engine", "vocoder")},
        recs={("tts_engine", "vocoder"): {"tts_engine": 0.85, "vocoder": 0.10}}, roles={}),
    ("moss-tts-delay", "default"): dict(
        stages=[("preprocessing", "pipeline", 0, None), ("tts_engine", "pipeline", 0, None),
                ("vocoder", "pipeline", 0, None)],
        edges={("preprocessing", "tts_engine"): ("next",), ("tts_engine", "vocoder"): ("next", "stream")},
        safe={("tts_engine", "vocoder")},
        recs={("tts_engine", "vocoder"): {"preprocessing": 0.05, "tts_engine": 0.85, "vocoder": 0.10}},
        roles={}),
    ("audar-tts", "default"): dict(
        stages=[("preprocessing", "pipeline", CPU, None), ("reference_encoder", "pipeline", 0, None),
                ("tts_engine", "pipeline", 0, None), ("vocoder", "pipeline", 0, None)],
        edges={("preprocessing", "reference_encoder"): ("next",), ("reference_encoder", "tts_engine"): ("next",),
               ("tts_engine", "vocoder"): ("next",)},
        safe={("preprocessing", "reference_encoder"), ("reference_encoder", "tts_engine"),
              ("tts_engine", "vocoder")},
        recs={}, roles={}),
    ("zonos2", "default"): dict(
        stages=[("preprocessing", "pipeline", 0, None), ("speaker_encode", "pipeline", 0, None),
                ("tts_engine", "pipeline", 0, None), ("vocoder", "pipeline", 0, None)],
        edges={("preprocessing", "speaker_encode"): ("next",), ("speaker_encode", "tts_engine"): ("next",),
               ("tts_engine", "vocoder"): ("next", "stream")},
        safe={("preprocessing", "speaker_encode"), ("speaker_encode", "tts_engine"), ("tts_engine", "vocoder")},
        recs={}, roles={}),
    ("zonos2", "multi-gpu"): dict(
        stages=[("preprocessing", "pipeline", 0, None), ("speaker_encode", "auxiliary", 1, None),
                ("tts_engine", "pipeline", 0, None), ("vocoder", "auxiliary", 1, None)],
        edges={("preprocessing", "speaker_encode"): ("next",), ("speaker_encode", "tts_engine"): ("next",),
               ("tts_engine", "vocoder"): ("next", "stream")},
        safe={("preprocessing", "speaker_encode"), ("speaker_encode", "tts_engine"), ("tts_engine", "vocoder")},
        recs={}, roles={}),
    ("dots-tts", "default"): dict(
        stages=[("preprocessing", "pipeline", CPU, None), ("reference_encode", "pipeline", 0, 0.04),
                ("tts_engine", "pipeline", 0, 0.84), ("audio_decode", "pipeline", 0, 0.04)],
        edges={("preprocessing", "reference_encode"): ("next",), ("reference_encode", "tts_engine"): ("next",),
               ("tts_engine", "audio_decode"): ("next",)},
        safe={("preprocessing", "reference_encode"), ("reference_encode", "tts_engine"),
              ("tts_engine", "audio_decode")},
        recs={}, roles={"vocoder": "audio_decode"}),
}


def test_every_card_and_variant_is_covered():
    shipped = {(c.name, v) for c in all_cards() for v in c.variants}
    # piper-joe and hibari-heart run real models (tests/models), not models.md's stand-in cards
    real = {(c.name, v) for c in all_cards() if _runs_a_real_model(c.name) for v in c.variants}
    assert {name for name, _ in real} == {"piper-joe", "hibari-heart"}
    assert shipped - {("moss-tts-local", "colocated")} - real == set(SPEC)
    assert len(all_cards()) == 12


def _runs_a_real_model(card: str) -> bool:
    """A card whose stage code lives beside it in models/ (the stand-ins' is the launcher's)."""
    return all(s.factory.startswith("models.") for s in load_pipeline(card).stages)


@pytest.mark.parametrize("card,variant", sorted(SPEC))
def test_card_matches_models_md(card, variant):
    spec = SPEC[card, variant]
    p = load_pipeline(card, variant=variant)
    got = []
    for s in p.stages:
        gpu = None if not s.gpus else (list(s.gpus) if s.is_tp else s.gpus[0])
        got.append((s.name, s.process, gpu, s.fraction))
    assert got == spec["stages"]
    assert p.handoffs() == spec["edges"]
    assert set(p.process_safe_edges) == spec["safe"]
    assert {r.edge: dict(r.fractions) for r in p.edge_resources} == spec["recs"]
    assert dict(p.roles) == spec["roles"]
    assert p.placement.max_total_gpu_memory_fraction_per_gpu == 1.0
    assert p.placement.require_memory_fraction_for_colocation is True
    # Every handoff that is not safe says why.
    for e in spec["edges"]:
        if e not in spec["safe"]:
            assert p.unsupported_reason(e)


def test_ming_tp2_declares_tensor_parallel_engine():
    p = load_pipeline("ming-omni-tts", variant="tp2")
    assert p.stage("tts_engine").tp_size == 2
    assert all(s.tp_size == 1 for s in p.stages if s.name != "tts_engine")


def test_moss_local_colocated_is_the_default_layout():
    a = load_pipeline("moss-tts-local")
    b = load_pipeline("moss-tts-local", variant="colocated")
    assert a.stages == b.stages and a.process_safe_edges == b.process_safe_edges


def test_unsupported_reasons_name_the_process_local_state():
    assert "PreparedRequestQueue" in load_pipeline("moss-tts-local").unsupported_reason(
        ("preprocessing", "tts_engine"))
    assert "_PREPARED_REQUESTS" in load_pipeline("qwen3-tts").unsupported_reason(
        ("preprocessing", "tts_engine"))


@pytest.mark.parametrize("selector,card", [
    ("bosonai/higgs-tts-3-4b", "higgs-tts"),
    ("bosonai/higgs-audio-v3-tts-4b", "higgs-tts"),
    ("HiggsMultimodalQwen3ForConditionalGeneration", "higgs-tts"),
    ("fishaudio/s2-pro", "fishaudio-s2-pro"),
    ("FishQwen3OmniForCausalLM", "fishaudio-s2-pro"),
    ("mistralai/Voxtral-4B-TTS-2603", "voxtral-tts"),
    ("inclusionAI/Ming-omni-tts-16.8B-A3B", "ming-omni-tts"),
    ("BailingMMNativeForConditionalGeneration", "ming-omni-tts"),
    ("OpenMOSS-Team/MOSS-TTS-Local-Transformer-v1.5", "moss-tts-local"),
    ("MossTTSLocalForConditionalGeneration", "moss-tts-local"),
    ("Qwen/Qwen3-TTS-12Hz-0.6B-Base", "qwen3-tts"),
    ("Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign", "qwen3-tts"),
    ("Qwen3TTSForConditionalGeneration", "qwen3-tts"),
    ("OpenMOSS-Team/MOSS-TTS-v1.5", "moss-tts-delay"),
    ("MossTTSDelayWithCodecModel", "moss-tts-delay"),
    ("audarai/Audar-TTS-V1-Turbo", "audar-tts"),
    ("AudarTTS", "audar-tts"),
    ("Zyphra/zonos2", "zonos2"),
    ("ZONOS2", "zonos2"),
    ("dots-tts", "dots-tts"),
    ("qwen/qwen3-tts-12hz-0.6b-base", "qwen3-tts"),  # case-insensitive fallback
    ("QWEN3-TTS", "qwen3-tts"),
])
def test_selectors(selector, card):
    assert find_card(selector).name == card


@pytest.mark.parametrize("card", all_cards(), ids=lambda c: c.name)
def test_a_card_asked_for_by_name_is_the_same_card_the_listing_reads(card):
    # By name the planner reads that card's own file only; it must not read it differently.
    assert find_card(card.name) == card


def test_the_cards_json_mirror_is_current():
    # Commands read built-in cards from it (no YAML parser at cold start) while it matches.
    directory = Path(str(resources.files("models")))
    mirror = card_mirror.build(directory)
    assert set(mirror) == {p.name for p in directory.glob("*.yaml")}, "JSON cannot carry a card"
    assert (directory / MIRROR).read_text(encoding="utf-8") == card_mirror.text(mirror), (
        "models/cards.json is stale: run `python -m planner.card_mirror`")


def test_a_card_file_that_no_longer_matches_its_mirror_is_read_from_its_yaml(monkeypatch):
    stale = {name: {"crc32": 0, "card": {"name": "stale"}} for name in cards._mirror()}
    monkeypatch.setattr(cards, "_mirror", lambda: stale)
    for cached in (cards.all_cards, cards._card_in_file_named):
        cached.cache_clear()
    try:
        assert find_card("qwen3-tts").raw["name"] == "qwen3-tts"
        assert "stale" not in {c.name for c in all_cards()}
    finally:
        for cached in (cards.all_cards, cards._card_in_file_named):
            cached.cache_clear()


def test_exact_match_wins_over_case_insensitive():
    # "Zonos2" and "ZONOS2" are both listed; each selects exactly, neither is ambiguous.
    assert find_card("Zonos2").name == "zonos2"


def test_unknown_model_and_variant_are_config_errors():
    with pytest.raises(ConfigError, match="no built-in model card matches 'nope'"):
        find_card("nope")
    with pytest.raises(ConfigError, match="has no variant 'tp4'.*default, tp2"):
        load_pipeline("ming-omni-tts", variant="tp4")


def test_graph_carries_kinds_and_safety():
    g = build_graph(load_pipeline("qwen3-tts"))
    assert list(g.nodes) == ["preprocessing", "tts_engine", "vocoder"]
    assert g.edges["tts_engine", "vocoder"]["kinds"] == ("next", "stream")
    assert g.edges["tts_engine", "vocoder"]["safe"] is True
    assert g.edges["preprocessing", "tts_engine"]["safe"] is False
    assert "_PREPARED_REQUESTS" in g.edges["preprocessing", "tts_engine"]["reason"]
    assert g.nodes["tts_engine"]["stage"].gpus == (0,)


def test_higgs_declared_topology():
    b = declared_baseline(load_pipeline("bosonai/higgs-tts-3-4b"))
    assert b.process == {"preprocessing": "tts_frontend", "audio_encoder": "tts_frontend",
                         "tts_engine": "pipeline", "vocoder": "vocoder"}
    assert b.runs_alone("vocoder") and not b.runs_alone("audio_encoder")
