"""Errors a user can cause by what they wrote, kept apart from programming errors."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConfigIssue:
    """One thing wrong with a config: where, what, and what is allowed instead."""

    source: str  # file name, card name, or "<dict>"
    key: str  # key path, e.g. "stages[name=vocoder].gpu"
    problem: str
    allowed: str = ""

    def sentence(self) -> str:
        where = f"{self.source}: {self.key}" if self.key else self.source
        text = f"{where}: {self.problem}"
        if self.allowed:
            text += f"; {self.allowed}"
        return text if text.endswith(".") else text + "."


class ConfigError(Exception):
    """A config or model selection the planner cannot use. Carries every issue found."""

    def __init__(self, issues: list[ConfigIssue] | ConfigIssue):
        self.issues = [issues] if isinstance(issues, ConfigIssue) else list(issues)
        super().__init__(self.paragraph())

    def paragraph(self) -> str:
        return " ".join(i.sentence() for i in self.issues)
