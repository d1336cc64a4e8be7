import pytest
import torch

from launcher import standins
from launcher.audio import Audio, wav_header


def run_pipeline(text, voice=None, local=False, **kw):
    mode = "process_local" if local else "payload"
    pre = standins.preprocessing(prepared_requests=mode)
    gen = standins.codec_generator(size="tiny", prepared_requests=mode, **kw)
    voc = standins.vocoder(size="tiny")
    data = {"text": text, "voice": voice}
    data.update(pre(data))
    chunks = [voc({**data, **c})["audio"] for c in gen(data)]
    return torch.cat(chunks)


def test_same_input_same_audio_and_expected_length():
    a = run_pipeline("Hello 42 world")
    assert torch.equal(a, run_pipeline("Hello 42 world"))
    assert a.numel() == standins.expected_samples("Hello 42 world")
    assert a.dtype == torch.float32 and a.abs().max() <= 1
    assert not torch.equal(a, run_pipeline("Hello 42 world", voice="alice"))


def test_process_local_mode_gives_the_same_audio_in_one_process():
    assert torch.equal(run_pipeline("same text", local=True), run_pipeline("same text"))


def test_process_local_lookup_in_an_empty_registry_names_the_handoff():
    gen = standins.codec_generator(size="tiny", prepared_requests="process_local",
                                   stage_name="tts_engine", process_name="tts_engine")
    with pytest.raises(RuntimeError, match="process-local handoff broken.*tts_engine"):
        list(gen({"prepared_request": "0" * 32, "prepared_by": "process 'pipeline' (pid 1)"}))


def test_bad_arguments_fail_at_build_time():
    with pytest.raises(ValueError, match="unknown stand-in size"):
        standins.vocoder(size="huge")
    with pytest.raises(ValueError, match="tp_size 3 must divide"):
        standins.codec_generator(size="tiny", tp_size=3)
    with pytest.raises(ValueError, match="prepared_requests"):
        standins.preprocessing(prepared_requests="shared")


def test_normalisation_and_wav_encoding():
    assert standins.normalise("  Hi\tTHERE 7 ") == "hi there seven"
    audio = Audio(torch.zeros(10))
    assert audio.wav()[:4] == b"RIFF" and len(audio.wav()) == 44 + 20
    assert len(wav_header(24000, None)) == 44


def test_a_long_text_of_wide_characters_is_spoken():
    # 4,096 characters (the HTTP limit) that NFKC expands to 135,000 byte tokens: the generator
    # attends to the first MAX_TEXT_TOKENS of them instead of asking for 146 GB.
    text = "\ufdfa" * 4096
    assert standins.tokenise(text).numel() > 100_000
    audio = run_pipeline(text, max_frames=2)
    assert audio.numel() == standins.expected_samples(text, max_frames=2)
