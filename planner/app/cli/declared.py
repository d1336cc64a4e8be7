"""Options declared once, as SGLang's `ServerArgs` declares a server's: each option is a field of a
frozen dataclass that carries its flag, type, default and help (a `Flag`), and from that one
declaration come both the argparse argument (`add_arguments`) and the words that ask for the same
value again (`to_argv`). A command's options are built once at the CLI edge (`from_args`); what
runs below gets the typed object, never an `argparse.Namespace`.

A flag two commands share is declared once and adjusted where one differs (`Flag.but`: another
default or help), so its spelling stays in one place; `to_argv` is what a command writes to run
another (`planner tune --verify` runs `planner bench`) or to record what ran.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

FLAG = "flag"  # field metadata: the field's Flag
NESTED = "options"  # field metadata: a field that is itself a group of declared options

D = TypeVar("D", bound="Declared")


@dataclass(frozen=True)
class Flag:
    """One command-line option: how argparse reads it and how it is written back.

    `repeat`: given any number of times, a tuple of values (argparse's `append`); `switch`: a
    store-true flag; `exclusive`: the options sharing a name are mutually exclusive;
    `shown_at_default`: `to_argv` writes the value also when it is the default."""

    name: str  # the long flag, e.g. "--output"
    short: str | None = None  # e.g. "-o"
    help: str | None = None
    type: Callable[[str], Any] | None = None
    default: Any = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    repeat: bool = False
    switch: bool = False
    exclusive: str | None = None
    shown_at_default: bool = True

    def but(self, **changes: Any) -> Flag:
        """This option as another command takes it (another default, help, ...)."""
        return dataclasses.replace(self, **changes)

    @property
    def empty(self) -> Any:
        """The field's value when the option is not given."""
        return () if self.repeat else (False if self.switch else self.default)

    def add_to(self, parser: argparse.ArgumentParser | argparse._ActionsContainer,
               dest: str) -> argparse.Action:
        names = (self.name, self.short) if self.short else (self.name,)
        kwargs: dict[str, Any] = {"dest": dest, "help": self.help}
        if self.switch:
            return parser.add_argument(*names, action="store_true", **kwargs)
        if self.repeat:
            kwargs["action"] = "append"
        for key in ("type", "metavar", "choices"):
            if getattr(self, key) is not None:
                kwargs[key] = getattr(self, key)
        return parser.add_argument(*names, default=None if self.repeat else self.default,
                                   **kwargs)

    def argv(self, value: Any) -> list[str]:
        """The words that give this option `value` (none for an option not given)."""
        if self.switch:
            return [self.name] if value else []
        if self.repeat:
            return [word for v in value for word in (self.name, _text(v))]
        if value is None or value == "" or (value == self.default
                                            and not self.shown_at_default):
            return []
        return [self.name, _text(value)]


def _text(value: Any) -> str:
    """A value as typed: a whole float without `.0`, any other without losing digits (`:g` keeps
    six, and a rate written so is another rate)."""
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def option(flag: Flag, **changes: Any) -> Any:
    """A dataclass field declared by `flag` (adjusted by `changes`, as `Flag.but`)."""
    flag = flag.but(**changes) if changes else flag
    return dataclasses.field(default=flag.empty, metadata={FLAG: flag})


def options(cls: type[Declared]) -> Any:
    """A dataclass field holding a group of declared options (e.g. which model)."""
    return dataclasses.field(default_factory=cls, metadata={NESTED: cls})


class Declared:
    """The base of a frozen dataclass whose fields are `option(...)`s and `options(...)`."""

    @classmethod
    def declared(cls) -> Iterator[tuple[str, Flag]]:
        """(field name, flag) of every option, nested groups' too, in declaration order."""
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if NESTED in f.metadata:
                yield from f.metadata[NESTED].declared()
            elif FLAG in f.metadata:
                yield f.name, f.metadata[FLAG]

    @classmethod
    def flag(cls, name: str) -> str:
        """The flag of the field `name`, as messages name it."""
        for field, flag in cls.declared():
            if field == name:
                return flag.name
        raise KeyError(f"{cls.__name__} declares no option {name!r}")

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        groups: dict[str, argparse._MutuallyExclusiveGroup] = {}
        for name, flag in cls.declared():
            where: Any = parser
            if flag.exclusive is not None:
                if flag.exclusive not in groups:
                    groups[flag.exclusive] = parser.add_mutually_exclusive_group()
                where = groups[flag.exclusive]
            flag.add_to(where, dest=name)

    @classmethod
    def from_args(cls: type[D], args: argparse.Namespace) -> D:
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if NESTED in f.metadata:
                values[f.name] = f.metadata[NESTED].from_args(args)
            elif FLAG in f.metadata:
                value = getattr(args, f.name)
                values[f.name] = tuple(value or ()) if f.metadata[FLAG].repeat else value
        return cls(**values)

    def to_argv(self) -> list[str]:
        """The options as words on a command line, in declaration order: parsed again, they
        give these options back."""
        return self._argv(given_only=False)

    def given_argv(self) -> list[str]:
        """Only the options that differ from their defaults, as a person types them: what a
        command prints for its user to paste (`to_argv` spells every default out, for a record)."""
        return self._argv(given_only=True)

    def _argv(self, given_only: bool) -> list[str]:
        words: list[str] = []
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if NESTED in f.metadata:
                words += value._argv(given_only)
            elif FLAG in f.metadata and not (given_only and value == f.metadata[FLAG].empty):
                words += f.metadata[FLAG].argv(value)
        return words
