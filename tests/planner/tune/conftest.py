"""Fixtures the tune tests share."""

import pytest

from planner import Profile, StageProfile


@pytest.fixture
def qwen3_profile(tmp_path):
    path = tmp_path / "profile.json"
    Profile(model="qwen3-tts", variant="default", cores=2, cpu_model="test", stages=(
        StageProfile("preprocessing", 0.5, 0.0, 0.0),
        StageProfile("tts_engine", 120.0, 20.0, 0.0, chunks_out=25, out_bytes=10_000),
        StageProfile("vocoder", 30.0, 10.0, 0.0, chunks_out=25)),
        frontend_ms=3.0, client_ms=1.5, process_rss_mib=280.0).save(path)
    return path
