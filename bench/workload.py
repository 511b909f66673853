"""What a workload is to the one harness (``python -m bench``): an id, the file name of its
report, its own parameters, and a ``run`` that measures and returns a :class:`~bench.report.Report`.
The harness gives every workload the same :class:`Context` (scale, rounds, work directory,
parameters), writes its report with the one writer and exits 1 if it says a run failed."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

from bench.report import Report


@dataclass(frozen=True)
class Context:
    """What the harness gives one workload's run."""

    work_dir: Path
    # Multiplies the workload's sizes (lines, requests, seconds of a window): smoke runs.
    scale: float = 1.0
    rounds: int = 1
    seed: int = 0
    # Seconds allowed per system run (side-by-side workloads).
    timeout: float = 4 * 3600
    # Engines without torch.compile (smoke runs).
    enforce_eager: bool = False
    # The side-by-side systems to run (empty: all).
    systems: tuple[str, ...] = ()
    # --param KEY=VALUE, parsed by the workload (:func:`parse_params`).
    params: Mapping[str, str] = field(default_factory=dict)
    log: Callable[[str], None] = print

    def scaled(self, size: int) -> int:
        return max(1, round(size * self.scale))


class Workload(Protocol):
    @property
    def id(self) -> str:
        """What --workloads takes: "W1", "W5", "load"."""
        ...

    @property
    def slug(self) -> str:
        """The report's file name after its date ("W5-upstream")."""
        ...

    @property
    def title(self) -> str:
        """The report's title."""
        ...

    @property
    def default_rounds(self) -> int:
        """Rounds when --rounds is not given; 0: the workload runs once and takes no --rounds."""
        ...

    # The dataclass of its --param values (defaults are the reported runs' settings).
    Params: ClassVar[type[Any]]

    def run(self, context: Context) -> Report:
        """Measure, and return the report (the harness writes it)."""
        ...


P = TypeVar("P")


def parse_params(cls: type[P], raw: Mapping[str, str]) -> P:
    """``cls`` (a dataclass) from --param strings: ints, floats, bools (1/0, true/false) and
    tuples of strings (comma-separated) by the field's type; unknown names are an error."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    if unknown := set(raw) - names:
        raise ValueError(f"unknown parameter(s) {sorted(unknown)}; {cls.__name__} takes {sorted(names) or 'none'}")
    values: dict[str, Any] = {}
    for name, text in raw.items():
        kind = hints[name]
        if kind is bool:
            if text.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(f"{name}: expected true or false, got {text!r}")
            values[name] = text.lower() in ("1", "true", "yes")
        elif kind in (int, float):
            values[name] = kind(text)
        elif typing.get_origin(kind) is tuple:
            values[name] = tuple(v.strip() for v in text.split(",") if v.strip())
        else:
            values[name] = text
    return cls(**values)


def describe_params(cls: type[Any]) -> str:
    """``name=default`` for each field, for --help."""
    fields = dataclasses.fields(cls)
    if not fields:
        return "no parameters"
    return ", ".join(f"{f.name}={_show(f.default)}" for f in fields)


def _show(value: object) -> str:
    return ",".join(value) if isinstance(value, tuple) else str(value)


@dataclass(frozen=True)
class NoParams:
    """A workload without parameters of its own."""


T = TypeVar("T")


def rotated(items: Sequence[T], round_: int) -> list[T]:
    """Each round starts one item later, so no system (or layer) always runs first, on cold
    caches; with two items the order swaps every round."""
    items = list(items)
    shift = round_ % len(items) if items else 0
    return items[shift:] + items[:shift]
