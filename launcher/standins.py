"""Stand-in TTS stages: small seeded torch models with the compute shape of a real pipeline.

They are NOT speech models. They exist so that any plan can be launched on a laptop and so the
launcher's process handling is exercised with real tensors and real compute:

- `preprocessing`: text normalisation and byte tokenisation, plus a synthetic reference clip per voice;
- `reference_encoder`: a strided conv encoder pooling the reference clip into a speaker embedding;
- `codec_generator`: an autoregressive transformer with a KV cache emitting multi-codebook codec
  frames (12.5 frames/s), in chunks; tensor-parallel over its codebook heads;
- `vocoder`: a convolutional upsampler from codec frames to 24 kHz PCM, chunk by chunk.

Point a stage's `factory` at a real implementation to serve a real model. A factory returns a
callable taking the request payload (a dict) and returning a dict of updates, or an iterator of
such dicts (a chunk stream). A value of `None` in an update removes that key from the payload. An
iterator may also yield `None` between the inner pieces of a long step: no output, a point where
the launcher may stop it when its request was cancelled (`launcher.cancellation`).

Determinism: weights come from a seeded generator on CPU, sampling noise from a generator seeded
by the request, and every computation has the same shapes wherever it runs (the tensor-parallel
path computes each codebook head exactly as the single-process path does). The same input
therefore gives bit-identical audio for every placement on one device type.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import threading
import unicodedata
import uuid
import zlib
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from launcher import cancellation
from launcher.audio import SAMPLE_RATE

FRAME_RATE = 12.5
HOP = int(SAMPLE_RATE / FRAME_RATE)  # 1920 samples per codec frame
_UPSAMPLE = (8, 8, 6, 5)  # product == HOP
VOCODER_CONTEXT = 2  # codec frames of left context each vocoder chunk re-decodes
REFERENCE_SECONDS = 0.5
BOS, EOS, TEXT_VOCAB = 256, 257, 258
# The generator attends to at most this many text tokens, like a real model's context. Prefill
# memory grows with the square of the prefix, and the byte tokens of 4,096 characters can run past
# 100,000 (NFKC expands U+FDFA to 18 characters, 33 bytes): without a cap, one valid request could
# ask for hundreds of GB and fail.
MAX_TEXT_TOKENS = 4096
# Prefix positions per prefill step of the generator (a cancellation point between two): at most
# 0.13 s of the base size on one busy core (4,000 characters: 63 pieces; one piece took 7 s).
PREFILL_PIECE = 64


@dataclass(frozen=True)
class Size:
    d_model: int
    layers: int
    heads: int
    codebooks: int
    codebook_size: int
    ref_channels: int
    voc_channels: int


# "base" takes a few hundred milliseconds per sentence on one CPU thread; "tiny" is for tests.
SIZES: dict[str, Size] = {
    "tiny": Size(d_model=32, layers=1, heads=2, codebooks=4, codebook_size=64, ref_channels=8,
                 voc_channels=16),
    "small": Size(d_model=128, layers=2, heads=4, codebooks=8, codebook_size=256, ref_channels=32,
                  voc_channels=48),
    "base": Size(d_model=256, layers=4, heads=4, codebooks=8, codebook_size=1024, ref_channels=64,
                 voc_channels=96),
}

PAYLOAD, PROCESS_LOCAL = "payload", "process_local"


def _size(size: str) -> Size:
    try:
        return SIZES[size]
    except KeyError:
        raise ValueError(f"unknown stand-in size {size!r}; choose one of {sorted(SIZES)}") from None


def _weights(seed: int, salt: str):
    gen = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(salt.encode()))

    def make(*shape: int, fan_in: int | None = None) -> torch.Tensor:
        scale = 1.0 / math.sqrt(fan_in or shape[-1])
        return torch.randn(*shape, generator=gen) * scale

    return make


# ---------------------------------------------------------------------------------------------
# Process-local prepared requests. Some real engines hand the prepared request from preprocessing
# to the AR engine through a module-level registry instead of the payload; a second process has an
# empty registry. The stand-ins reproduce that when a card passes prepared_requests=process_local.

_PREPARED: OrderedDict[str, dict[str, Any]] = OrderedDict()
_PREPARED_LOCK = threading.Lock()
# A request that failed before its consumer ran never pops its entry: the registry is bounded,
# oldest out first. The launcher offers `max_prepared` from its admission bound
# (`launcher.control.admission.registry_size`), so every request it lets in keeps its entry.
_PREPARED_CAP = [256]


def _hold_at_least(n: int) -> None:
    with _PREPARED_LOCK:
        _PREPARED_CAP[0] = max(_PREPARED_CAP[0], n)


def _publish(entry: dict[str, Any]) -> str:
    key = uuid.uuid4().hex
    with _PREPARED_LOCK:
        _PREPARED[key] = entry
        while len(_PREPARED) > _PREPARED_CAP[0]:
            _PREPARED.popitem(last=False)
    return key


def _lookup(payload: Mapping[str, Any], consumer: str, process: str, *, pop: bool) -> dict[str, Any]:
    key = payload.get("prepared_request")
    if key is None:
        raise RuntimeError(
            f"{consumer}: no 'prepared_request' key in the payload; the stage before it must also be "
            "built with prepared_requests=process_local"
        )
    with _PREPARED_LOCK:
        entry = _PREPARED.pop(key, None) if pop else _PREPARED.get(key)
    if entry is None:
        origin = payload.get("prepared_by", "another process")
        if payload.get("prepared_pid") == os.getpid():
            raise RuntimeError(
                f"{consumer}: prepared request {key[:8]} was published in this process "
                f"('{process}', pid {os.getpid()}) but is no longer in its registry: more than "
                f"{_PREPARED_CAP[0]} prepared requests were waiting at once, and the oldest were "
                "dropped. hint: admit fewer requests at once (planner serve --max-queued), or "
                "offer the stages a larger max_prepared."
            )
        raise RuntimeError(
            f"process-local handoff broken: prepared request {key[:8]} was published by "
            f"{origin}, but {consumer} runs in process '{process}' (pid {os.getpid()}), whose "
            "prepared-request registry is empty. This handoff passes process-local state "
            "(prepared_requests=process_local), so both stages must run in the same process."
        )
    return entry


def _check_mode(mode: str) -> str:
    if mode not in (PAYLOAD, PROCESS_LOCAL):
        raise ValueError(f"prepared_requests must be {PAYLOAD!r} or {PROCESS_LOCAL!r}, not {mode!r}")
    return mode


# ---------------------------------------------------------------------------------------------


_DIGITS = "zero one two three four five six seven eight nine".split()


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"\d", lambda m: f" {_DIGITS[int(m.group())]} ", text)
    return re.sub(r"\s+", " ", text).strip()


def tokenise(text: str) -> torch.Tensor:
    ids = [BOS, *normalise(text).encode("utf-8"), EOS]
    return torch.tensor(ids, dtype=torch.int64)


def reference_clip(voice: str, seed: int = 0) -> torch.Tensor:
    """A deterministic stand-in for a voice's reference recording: a few partials plus noise."""
    gen = torch.Generator().manual_seed(zlib.crc32(voice.encode()) ^ seed)
    n = int(REFERENCE_SECONDS * SAMPLE_RATE)
    t = torch.arange(n, dtype=torch.float32) / SAMPLE_RATE
    f0 = 90.0 + 160.0 * torch.rand((), generator=gen)
    clip = sum(torch.sin(2 * math.pi * f0 * k * t) / k for k in range(1, 5))
    return (0.3 * clip + 0.02 * torch.randn(n, generator=gen)).to(torch.float32)


def expected_frames(text: str, frames_per_token: float = 1.0, max_frames: int = 1500) -> int:
    return min(max(1, math.ceil(tokenise(text).numel() * frames_per_token)), max_frames)


def expected_samples(text: str, frames_per_token: float = 1.0, max_frames: int = 1500) -> int:
    """Length of the audio the stand-in pipeline returns for `text`."""
    return expected_frames(text, frames_per_token, max_frames) * HOP


class Preprocessing:
    def __init__(self, seed: int, prepared_requests: str, process_name: str,
                 max_prepared: int = 256) -> None:
        _hold_at_least(max_prepared)
        self.seed = seed
        self.mode = _check_mode(prepared_requests)
        self.process_name = process_name

    def __call__(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        text = payload["text"]
        voice = payload.get("voice") or "default"
        prepared = {"tokens": tokenise(text), "reference_audio": reference_clip(voice, self.seed)}
        if self.mode == PAYLOAD:
            return prepared
        who = f"process '{self.process_name}' (pid {os.getpid()})"
        return {"prepared_request": _publish(prepared), "prepared_by": who,
                "prepared_pid": os.getpid()}


def preprocessing(*, seed: int = 0, prepared_requests: str = PAYLOAD, process_name: str = "?",
                  size: str = "base", max_prepared: int = 256) -> Preprocessing:
    """`max_prepared`: how many prepared requests (process_local) this process's registry holds
    at least; the launcher offers its admission bound's (`admission.registry_size`)."""
    _size(size)
    return Preprocessing(seed, prepared_requests, process_name, max_prepared)


class ReferenceEncoder:
    def __init__(self, size: Size, seed: int, mode: str, device: str, stage: str, process: str):
        make = _weights(seed, "reference_encoder")
        c = size.ref_channels
        self.convs = [
            (make(c, 1, 9, fan_in=9).to(device), 4),
            (make(c, c, 9, fan_in=9 * c).to(device), 4),
            (make(c, c, 9, fan_in=9 * c).to(device), 4),
        ]
        self.proj = make(c, size.d_model).to(device)
        self.mode, self.device, self.stage, self.process = mode, device, stage, process

    @torch.inference_mode()
    def __call__(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        if self.mode == PROCESS_LOCAL:
            audio = _lookup(payload, self.stage, self.process, pop=False)["reference_audio"]
        else:
            audio = payload["reference_audio"]
        x = audio.to(self.device, torch.float32).reshape(1, 1, -1)
        for w, stride in self.convs:
            x = F.gelu(F.conv1d(x, w, stride=stride, padding=w.shape[-1] // 2))
        emb = x.mean(dim=-1).reshape(-1) @ self.proj
        return {"speaker_embedding": emb.cpu(), "reference_audio": None}


def reference_encoder(*, size: str = "base", seed: int = 0, prepared_requests: str = PAYLOAD,
                      device: str = "cpu", stage_name: str = "reference_encoder",
                      process_name: str = "?") -> ReferenceEncoder:
    return ReferenceEncoder(_size(size), seed, _check_mode(prepared_requests), device, stage_name,
                            process_name)


class CodecGenerator:
    """Autoregressive decoder: text tokens + speaker prefix -> multi-codebook codec frames."""

    def __init__(self, size: Size, seed: int, mode: str, device: str, stage: str, process: str,
                 tp_rank: int, tp_size: int, frames_per_token: float, chunk_frames: int,
                 max_frames: int) -> None:
        if size.codebooks % tp_size:
            raise ValueError(
                f"{stage}: tp_size {tp_size} must divide the stand-in's {size.codebooks} codebooks"
            )
        make = _weights(seed, "codec_generator")
        d, self.size = size.d_model, size
        self.text_emb = make(TEXT_VOCAB, d, fan_in=1).to(device) * 0.5
        self.code_emb = make(size.codebooks, size.codebook_size, d, fan_in=size.codebooks).to(device)
        self.spk_proj = make(d, d).to(device)
        self.ref_proj = make(64, d).to(device)
        self.layers = [
            {
                "qkv": make(d, 3 * d).to(device),
                "out": make(d, d).to(device),
                "up": make(d, 4 * d).to(device),
                "down": make(4 * d, d).to(device),
            }
            for _ in range(size.layers)
        ]
        # One matrix per codebook, always multiplied on its own: a rank computing a slice of the
        # codebooks then runs exactly the kernels the single-process path runs.
        self.heads = make(size.codebooks, d, size.codebook_size).to(device)
        per = size.codebooks // tp_size
        self.mine = range(tp_rank * per, (tp_rank + 1) * per)
        self.tp_size, self.seed = tp_size, seed
        self.mode, self.device, self.stage, self.process = mode, device, stage, process
        self.frames_per_token, self.chunk_frames, self.max_frames = (
            frames_per_token, chunk_frames, max_frames)

    def _block(self, x: torch.Tensor, layer: dict, cache: list, pos: int) -> torch.Tensor:
        heads, (n, d) = self.size.heads, x.shape
        hd = d // heads
        q, k, v = (F.layer_norm(x, (d,)) @ layer["qkv"]).split(d, dim=-1)
        q, k, v = (t.reshape(n, heads, hd).transpose(0, 1) for t in (q, k, v))
        kc, vc = cache
        kc[:, pos:pos + n] = k
        vc[:, pos:pos + n] = v
        keys, vals = kc[:, :pos + n], vc[:, :pos + n]
        scores = (q @ keys.transpose(1, 2)) / math.sqrt(hd)
        if n > 1:  # prefill: causal mask over the prefix
            mask = torch.ones(n, pos + n, dtype=torch.bool, device=x.device).tril(pos)
            scores = scores.masked_fill(~mask, float("-inf"))
        att = (scores.softmax(-1) @ vals).transpose(0, 1).reshape(n, d)
        x = x + att @ layer["out"]
        return x + F.gelu(F.layer_norm(x, (d,)) @ layer["up"]) @ layer["down"]

    def _trunk(self, x: torch.Tensor, caches: list, pos: int) -> torch.Tensor:
        for layer, cache in zip(self.layers, caches):
            x = self._block(x, layer, cache, pos)
        return x

    def _gather(self, mine: torch.Tensor) -> torch.Tensor:
        if self.tp_size == 1:
            return mine
        import torch.distributed as dist

        parts = [torch.empty_like(mine) for _ in range(self.tp_size)]
        dist.all_gather(parts, mine)
        return torch.cat(parts)

    @torch.inference_mode()
    def __call__(self, payload: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        if self.mode == PROCESS_LOCAL:
            prepared = _lookup(payload, self.stage, self.process, pop=True)
            tokens, reference = prepared["tokens"], prepared["reference_audio"]
        else:
            tokens, reference = payload["tokens"], payload.get("reference_audio")
        d, dev = self.size.d_model, self.device
        if payload.get("speaker_embedding") is not None:
            speaker = payload["speaker_embedding"].to(dev) @ self.spk_proj
        elif reference is not None:  # cards without a reference encoder: pool the clip directly
            frames = reference[: 64 * 128].reshape(64, 128)
            profile = torch.fft.rfft(frames).abs().mean(0)[:64]
            speaker = (profile / profile.norm() * 8.0).to(dev) @ self.ref_proj
        else:
            speaker = torch.zeros(d, device=dev)
        n_frames = min(max(1, math.ceil(tokens.numel() * self.frames_per_token)), self.max_frames)
        prefix = torch.cat([speaker.reshape(1, d),
                            self.text_emb[tokens[:MAX_TEXT_TOKENS].to(dev)]])
        total = prefix.shape[0] + n_frames
        hd = d // self.size.heads
        caches = [[torch.zeros(self.size.heads, total, hd, device=dev) for _ in range(2)]
                  for _ in self.layers]
        # Prefill in pieces, as serving engines chunk a long prefill: between two pieces the
        # runner may close this generator (`yield None`: a cancellation point, no output, see
        # `launcher.cancellation`), so an abandoned 4,000-character request frees the engine
        # within one piece, not seconds.
        points = cancellation.points_wanted()
        for start in range(0, prefix.shape[0], PREFILL_PIECE):
            if start and points:
                yield None
            out = self._trunk(prefix[start:start + PREFILL_PIECE], caches, start)
        h = F.layer_norm(out[-1:], (d,))
        pos = prefix.shape[0]
        noise_gen = torch.Generator().manual_seed(
            zlib.crc32(tokens.numpy().tobytes()) ^ (self.seed * 7919))
        frames: list[torch.Tensor] = []
        sent = 0
        for step in range(n_frames):
            gumbel = -torch.log(-torch.log(
                torch.rand(self.size.codebooks, self.size.codebook_size, generator=noise_gen)
                .clamp_(1e-9, 1 - 1e-9)))
            mine = torch.stack([
                ((h[0] @ self.heads[k]).cpu() * 3.0 + gumbel[k]).argmax() for k in self.mine
            ])
            codes = self._gather(mine.to(dev) if dev != "cpu" else mine).cpu()
            frames.append(codes)
            x = sum(self.code_emb[k, codes[k]] for k in range(self.size.codebooks)).reshape(1, d)
            h = F.layer_norm(self._trunk(x, caches, pos), (d,))
            pos += 1
            if len(frames) - sent == self.chunk_frames or step == n_frames - 1:
                start = max(0, sent - VOCODER_CONTEXT)
                yield {
                    "codes": torch.stack(frames[start:]),
                    "context_frames": sent - start,
                    "tokens": None,
                    "reference_audio": None,
                    "prepared_request": None,
                    "prepared_by": None,
                    "prepared_pid": None,
                }
                sent = len(frames)


def codec_generator(*, size: str = "base", seed: int = 0, prepared_requests: str = PAYLOAD,
                    device: str = "cpu", stage_name: str = "codec_generator",
                    process_name: str = "?", tp_rank: int = 0, tp_size: int = 1,
                    frames_per_token: float = 1.0, chunk_frames: int = 4,
                    max_frames: int = 1500) -> CodecGenerator:
    return CodecGenerator(_size(size), seed, _check_mode(prepared_requests), device, stage_name,
                          process_name, tp_rank, tp_size, frames_per_token, chunk_frames,
                          max_frames)


class Vocoder:
    def __init__(self, size: Size, seed: int, device: str) -> None:
        make = _weights(seed, "vocoder")
        c = size.voc_channels
        self.code_emb = make(size.codebooks, size.codebook_size, c, fan_in=size.codebooks).to(device)
        self.spk = make(size.d_model, c).to(device)
        self.pre = make(c, c, 3, fan_in=3 * c).to(device)
        chans = [c]
        for _ in _UPSAMPLE:
            chans.append(max(4, chans[-1] // 2))
        self.ups = [make(b, a, 7, fan_in=7 * a).to(device) for a, b in itertools.pairwise(chans)]
        self.post = make(1, chans[-1], 7, fan_in=7 * chans[-1]).to(device)
        self.size, self.device = size, device

    @torch.inference_mode()
    def __call__(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        codes = payload["codes"].to(self.device)
        x = sum(self.code_emb[k, codes[:, k]] for k in range(self.size.codebooks))  # [n, c]
        if payload.get("speaker_embedding") is not None:
            x = x + payload["speaker_embedding"].to(self.device) @ self.spk
        x = F.conv1d(x.T.unsqueeze(0), self.pre, padding=1)
        for w, factor in zip(self.ups, _UPSAMPLE):
            x = F.leaky_relu(F.conv1d(x.repeat_interleave(factor, dim=-1), w, padding=3), 0.1)
        audio = torch.tanh(F.conv1d(x, self.post, padding=3)).reshape(-1)
        audio = audio[int(payload.get("context_frames", 0)) * HOP:]
        return {"audio": audio.to("cpu", torch.float32), "codes": None}


def vocoder(*, size: str = "base", seed: int = 0, device: str = "cpu") -> Vocoder:
    return Vocoder(_size(size), seed, device)


class NullStage:
    """A stage that does no work: the launcher's own overhead, measured with nothing else in it.

    `source` (an entry stage) hands on `payload_bytes` of a tensor made once at build time,
    `relay` hands its input on unchanged, `sink` (a terminal stage) returns the first samples as
    its 'audio' and drops the rest, so only the handoffs between stages move the payload.
    """

    def __init__(self, role: str, payload_bytes: int) -> None:
        if role not in ("source", "relay", "sink"):
            raise ValueError(f"null stage role must be source, relay or sink, not {role!r}")
        self.role = role
        self.payload = torch.rand(max(1, payload_bytes // 4), dtype=torch.float32)

    def __call__(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        if self.role == "source":
            return {"data": self.payload, "text": None, "voice": None}
        if self.role == "sink":
            return {"audio": payload["data"][:256].clone(), "data": None}
        return {}


def null_stage(*, role: str = "relay", payload_bytes: int = 1024) -> NullStage:
    return NullStage(role, payload_bytes)
