"""A plugin module (loaded by test_registry.py through an entry point) whose backends
are declared wrongly in every way the registry relies on, beside one declared well."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, field_validator, model_validator

from zyx.config import BackendSection
from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl

ZYX_PLUGIN_API = "1.0"


class Plain(BaseModel):
    """A pydantic model that is not a BackendSection: it has no ``enabled``."""


class Required(BackendSection):
    path: str


class Raising(BackendSection):
    @model_validator(mode="after")
    def broken(self) -> Raising:
        raise TypeError("a validator with a bug")


class Fine(BackendSection):
    level: int = 1


class Picky(BackendSection):
    """Loads (its default is fine) but fails on some values as no validator should."""

    mode: str = "a"

    @field_validator("mode")
    @classmethod
    def broken(cls, value: str) -> str:
        if value != "a":
            raise TypeError(f"cannot handle {value!r}")
        return value


def probe() -> ProbeResult:
    return ProbeResult(available=True, devices=1)


def spec(name: str, **fields: Any) -> BackendSpec:
    return BackendSpec(**{"name": name, "config": Fine, "probe": probe,
                          "open": lambda section: [], **fields})  # fmt: skip


@hookimpl
def zyx_backends() -> list[BackendSpec]:
    return [
        spec("plain", config=Plain),
        spec("required", config=Required),
        spec("raising", config=Raising),
        spec("picky", config=Picky),
        spec("unranked", priority=None),
        spec("nothing", probe=lambda: None),
        spec("nolibraries", probe=lambda: ProbeResult(True, 1, libraries=None)),  # type: ignore[arg-type]
        spec("badspecs"),
    ]
