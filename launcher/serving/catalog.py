"""What one server speaks: the names a request's `model` may give and the voices its `voice` may
name, both from the plan, and how `GET /v1/models` and `GET /v1/audio/voices` list them.

A server runs one model. `model` may name it by the card's name (`plan.model`), by any of the
card's model paths (`plan.model_paths`, e.g. `rhasspy/piper-voices/en_US-joe-medium`), or by one of
OpenAI's speech model names (`OPENAI_ALIASES`), which OpenAI clients and the bench send as they are;
case does not matter. Every accepted name means the same model. A request without `model` gets
the served model too: OpenAI's API requires the field, but curl users leave it out.

`voice` is one of the card's `voices` or `default` (the card's first voice); a card that lists
no voices takes any voice name and hands it to the stages. Where a card has one voice, OpenAI's
voice names (`OPENAI_VOICES`) stand for it, as OpenAI-compatible servers commonly do, so code
written for OpenAI (`voice="alloy"`) runs unchanged; the stages get the card's voice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner import Plan

OPENAI_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
# OpenAI's built-in speech voices (its API reference for `POST /v1/audio/speech`).
OPENAI_VOICES = ("alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage",
                 "shimmer", "verse", "marin", "cedar")
DEFAULT_VOICE = "default"  # always accepted: the card's first voice (the bench client sends it)
OWNER = "stage-planner"  # OpenAI's `owned_by`: who serves the model here


@dataclass(frozen=True)
class Catalog:
    model: str | None  # the card's (or a complete pipeline's) name; None: any `model` is taken
    model_paths: tuple[str, ...] = ()
    voices: tuple[str, ...] = ()  # () = any voice
    created: int = 0  # when the server started, in Unix seconds (OpenAI's `created`)

    @classmethod
    def of(cls, plan: Plan, created: int) -> Catalog:
        """The catalog of `plan`."""
        return cls(plan.model, tuple(plan.model_paths), tuple(plan.voices), created)

    @property
    def model_ids(self) -> tuple[str, ...]:
        """Every name `model` may give, the card's own first."""
        if self.model is None:
            return ()
        return tuple(dict.fromkeys((self.model, *self.model_paths, *OPENAI_ALIASES)))

    def model_problem(self, name: str) -> str | None:
        """Why `model` = `name` is not served here, or None when it is."""
        if self.model is None or name.casefold() in {i.casefold() for i in self.model_ids}:
            return None
        return (f"this server speaks {self.model}, not {_quoted(name)}; send 'model' as one of "
                f"{', '.join(self.model_ids)} (or leave it out); GET /v1/models lists them")

    @property
    def voice_aliases(self) -> tuple[str, ...]:
        """OpenAI's voice names that stand for the card's one voice (none for a card of several
        voices, or of any; a card's own voice keeps its name)."""
        if len(self.voices) != 1:
            return ()
        return tuple(v for v in OPENAI_VOICES if v != self.voices[0])

    def voice_problem(self, name: str) -> str | None:
        """Why `voice` = `name` is not a voice of the served model, or None when it is."""
        if not self.voices or name in (*self.voices, DEFAULT_VOICE, *self.voice_aliases):
            return None
        aliases = (f", or an OpenAI voice name such as {self.voice_aliases[0]}"
                   if self.voice_aliases else "")
        return (f"'voice' {_quoted(name)} is not a voice of this model; it has "
                f"{', '.join(self.voices)} (or {DEFAULT_VOICE}{aliases}); GET /v1/audio/voices "
                f"lists them")

    def voice_for(self, name: str) -> str:
        """The voice the stages get for `voice` = `name`: the card's own for an OpenAI name."""
        return self.voices[0] if name in self.voice_aliases else name

    def models_json(self) -> dict[str, Any]:
        """OpenAI's model list; `root` (as vLLM has it) says which model an alias stands for."""
        return {"object": "list", "data": [self._model_json(name) for name in self.model_ids]}

    def model_json(self, name: str) -> dict[str, Any] | None:
        """One model as `GET /v1/models/{name}` shows it (OpenAI's `models.retrieve`), or None."""
        folded = name.casefold()
        return next((self._model_json(i) for i in self.model_ids if i.casefold() == folded), None)

    def _model_json(self, name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": self.created, "owned_by": OWNER,
                "root": self.model}

    def voices_json(self) -> dict[str, Any]:
        """The voices `voice` may name, the default first, then OpenAI's names that stand for it
        (`alias_of`); `any_voice` when the card lists none (then any name reaches the stages, and
        `default` is the only one listed)."""
        names = self.voices or (DEFAULT_VOICE,)
        own = [{"id": name, "object": "voice", "default": i == 0} for i, name in enumerate(names)]
        aliases = [{"id": name, "object": "voice", "default": False, "alias_of": self.voices[0]}
                   for name in self.voice_aliases]
        return {"object": "list", "model": self.model, "any_voice": not self.voices,
                "data": own + aliases}


def _quoted(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:40] + "...")  # repr escapes surrogates
