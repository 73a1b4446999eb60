"""zyx's configuration: one pydantic model whose sections the backends contribute.

Sources, later wins:

1. built-in defaults (the field defaults of each section model);
2. one JSON file: the file ``$ZYX_CONFIG`` names, else ``$XDG_CONFIG_HOME/zyx/config.json``,
   else ``~/.config/zyx/config.json``;
3. environment variables ``ZYX_<SECTION>__<FIELD>`` and ``ZYX_DEFAULT_DEVICE``, whose
   values are JSON (``ZYX_CUDA__DEVICE_IDS='[0]'``; a value that is not JSON is a string);
4. ``zyx.configure(...)``.

Every value keeps the name of its source (file path, variable, ``zyx.configure()``), so an
invalid one raises a ``ConfigError`` that names source, field path and value (cut to a
readable length), listing every problem found, and
``zyx config show`` can say where each value came from. zyx reads the sources itself rather
than through pydantic-settings, whose merged sources no longer know which variable or file
a bad value came from.

A backend's section is a subclass of :class:`BackendSection`, named by its ``BackendSpec``.

Nothing a source holds hangs, floods or tracebacks: the file is read only where it is a
regular file of at most ``MAX_FILE_BYTES`` (a FIFO would wait for a writer, ``/dev/zero``
never end), JSON nested deeper than ``MAX_DEPTH`` and integers past Python's digit limit
are problems like any other.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import PydanticCustomError

from zyx.errors import ConfigError
from zyx.files import NotARegularFile, open_regular

FieldPath = tuple[str, ...]
"""A field's place in the config: ``("cuda", "queues")`` or ``("default_device",)``."""

DEFAULT = "default"
"""The source of a value nobody set."""
CONFIGURE = "zyx.configure()"
"""The source of values set by :func:`zyx.configure`."""

SCALARS = frozenset({"default_device"})
"""Top-level fields that are values rather than sections."""
CORE_SECTIONS = frozenset({"autotune"})
"""Sections that belong to zyx itself rather than to a backend."""

MAX_FILE_BYTES = 1 << 20
"""The largest config file zyx reads: a whole config is a few hundred bytes; a larger file
is something else named by mistake."""
MAX_DEPTH = 16
"""The deepest nesting of objects and lists a config holds (its own is 3: a section, a
field, a list)."""


class BackendSection(BaseModel):
    """Base of every backend's config section. Unknown keys in a section are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    """``false``: zyx does not open this backend (nor import the plugin of the same name)."""


class AutotuneSection(BaseModel):
    """How zyx picks among kernel variants by measured time (``zyx.search``): at a plan's
    first build, once per kernel."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    """Measure variants; ``false`` runs each kernel's default variant."""
    cache: bool = True
    """Keep the winners on disk across runs (``zyx tune`` shows and clears them)."""
    budget: float = Field(default=2.0, ge=0, allow_inf_nan=False)
    """Seconds one kernel's search may take, compiles included: variants not started by then
    are not tried (the default is always timed)."""
    runs: int = Field(default=3, ge=1, le=100)
    """Timed runs per variant, after one warm-up; the fastest counts."""
    min_time: float = Field(default=5e-5, ge=0, allow_inf_nan=False)
    """Seconds: a kernel whose default variant runs faster is not searched further (a
    launch's overhead is of that order: too little to win)."""


DEVICE = re.compile(r"([a-z][a-z0-9_]*)(?::([0-9]+))?")
"""A device string, whole (``fullmatch``): ``host``, ``cuda``, ``cuda:1``; groups: the
backend's name and the index."""


def device_problem(value: object) -> str:
    """Why ``value`` is not a device string, or ``""``."""
    if isinstance(value, str) and DEVICE.fullmatch(value):
        return ""
    lower = value.lower() if isinstance(value, str) else ""
    hint = f"; did you mean {lower!r}?" if DEVICE.fullmatch(lower) else ""
    return f"not a device string (lowercase, like 'host', 'cuda' or 'cuda:1'){hint}"


def _device_name(value: str) -> str:
    # The message quotes only [a-z0-9_:] from the value: no braces for pydantic to format.
    problem = device_problem(value)
    if problem:
        raise PydanticCustomError("device_name", problem)
    return value


DeviceName = Annotated[str, AfterValidator(_device_name)]
"""A device string: ``host``, ``cuda``, ``cuda:1``."""


class ZyxConfig(BaseModel):
    """The whole configuration: core fields here, one section per backend added at discovery."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    autotune: AutotuneSection = Field(default_factory=AutotuneSection)
    default_device: DeviceName | None = None
    """The device ``zyx.device()`` returns; unset: the first device of the backend with the
    highest priority."""

    @classmethod
    def with_sections(cls, sections: Mapping[str, type[BaseModel]]) -> type[ZyxConfig]:
        """This model extended by one field per backend section (name to section model)."""
        return _extend(cls, tuple(sorted(sections.items())))


@lru_cache(maxsize=16)
def _extend(
    base: type[ZyxConfig], sections: tuple[tuple[str, type[BaseModel]], ...]
) -> type[ZyxConfig]:
    fields: dict[str, Any] = {
        name: (model, Field(default_factory=model)) for name, model in sections
    }
    return create_model(base.__name__, __base__=base, __module__=base.__module__, **fields)


@dataclass(frozen=True)
class Setting:
    """One value someone set, and where: file path, variable name or ``zyx.configure()``."""

    value: Any
    source: str


RawConfig = dict[FieldPath, Setting]
"""Settings before validation, one per field path; merging sources is ``dict`` union."""


@dataclass(frozen=True)
class Sources:
    """The file and the environment, read and merged (the environment wins)."""

    raw: RawConfig
    files: tuple[Path, ...]
    """The config files that were read (none when there is none)."""


def flatten(data: Mapping[str, Any], source: str) -> RawConfig:
    """``{"cuda": {"queues": 8}}`` to ``{("cuda", "queues"): Setting(8, source)}``."""
    raw: RawConfig = {}
    for key, value in data.items():
        if isinstance(value, Mapping) and key not in SCALARS:
            raw.update({(key, name): Setting(v, source) for name, v in value.items()})
        else:  # a value, or a section that is not an object: validate() says which
            raw[(key,)] = Setting(value, source)
    return raw


def config_file(environ: Mapping[str, str]) -> tuple[Path, str | None]:
    """The config file to read and the variable that named it (``None``: the default place)."""
    if named := environ.get("ZYX_CONFIG"):
        return Path(named).expanduser(), "ZYX_CONFIG"
    base = environ.get("XDG_CONFIG_HOME") or str(
        Path(environ.get("HOME") or Path.home()) / ".config"
    )
    return Path(base) / "zyx" / "config.json", None


def read_file(path: Path, *, required_by: str | None = None) -> RawConfig:
    """The settings in a JSON config file. A missing file is empty unless ``required_by``
    (the variable or command that named it) says it must exist."""
    try:
        with open_regular(path) as file:
            content = file.read(MAX_FILE_BYTES + 1)
        text = content.decode("utf-8")
    except (FileNotFoundError, NotADirectoryError):
        # The default place may not even be a possible path (XDG_CONFIG_HOME names a file).
        if required_by is None:
            return {}
        raise ConfigError(required_by, "(file)", str(path), "no such file") from None
    except NotARegularFile:
        raise ConfigError(
            str(path), "(file)", str(path), "is not a regular file (a FIFO, a device?): not read"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(str(path), "(file)", str(path), f"cannot be read: {error}") from None
    if len(content) > MAX_FILE_BYTES:
        problem = f"is over {MAX_FILE_BYTES} bytes: no config file is"
        raise ConfigError(str(path), "(file)", str(path), problem)
    try:
        data = _parse(text, str(path), "(file)", str(path))
    except json.JSONDecodeError as error:
        # A truncated file fails past its last line: show the last line there is.
        lines = text.splitlines() or [text]
        line = lines[min(error.lineno, len(lines)) - 1]
        raise ConfigError(
            f"{path}:{error.lineno}:{error.colno}", "(JSON syntax)", line.strip(), error.msg
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(str(path), "(top level)", data, "must be a JSON object of sections")
    return flatten(data, str(path))


def read_environment(environ: Mapping[str, str]) -> RawConfig:
    """Settings from ``ZYX_<SECTION>__<FIELD>`` and ``ZYX_DEFAULT_DEVICE``.

    Other ``ZYX_*`` variables (``ZYX_DEBUG``, ``ZYX_PLUGINS``, ...) are not config fields.
    """
    raw: RawConfig = {}
    for name, text in sorted(environ.items()):
        if not name.startswith("ZYX_"):
            continue
        key = name[len("ZYX_") :].lower()
        section, nested, field = key.partition("__")
        if nested and section and field:
            raw[(section, field)] = Setting(_decode(text, name, f"{section}.{field}"), name)
        elif key in SCALARS:
            raw[(key,)] = Setting(_decode(text, name, key), name)
    return raw


def _decode(text: str, variable: str, field: str) -> Any:
    # Values are JSON so lists and booleans can be written; a bare word such as
    # ZYX_DEFAULT_DEVICE=cuda is not JSON and is taken as the string it reads as.
    try:
        return _parse(text, variable, field, text)
    except json.JSONDecodeError:
        return text


def _parse(text: str, source: str, field: str, shown: object) -> Any:
    """``text`` as JSON. JSON nested too deep for Python's parser, or a number of more
    digits than Python converts, is a ``ConfigError`` naming ``source``, ``field`` and
    ``shown``; a syntax error stays a ``json.JSONDecodeError``."""
    try:
        return json.loads(text)
    except RecursionError:
        problem = f"objects and lists nested deeper than {MAX_DEPTH}"
    except json.JSONDecodeError:
        raise
    except ValueError:
        problem = f"a number of more than {sys.get_int_max_str_digits()} digits"
    raise ConfigError(source, field, shown, problem)


def read_sources(environ: Mapping[str, str]) -> Sources:
    """Read the config file and the environment."""
    path, named_by = config_file(environ)
    from_file = read_file(path, required_by=named_by)
    return Sources(raw=from_file | read_environment(environ), files=(path,) if from_file else ())


@dataclass(frozen=True)
class Config:
    """The validated configuration, with the source of every value."""

    values: ZyxConfig
    sources: Mapping[FieldPath, str]
    """Source of each value someone set; every other value is the default."""
    files: tuple[Path, ...] = ()
    warnings: tuple[str, ...] = ()
    """Sections for backends that are not installed, or that could not be checked (ignored)."""
    unchecked: tuple[str, ...] = ()
    """Sections set but not checked: their plugin is installed but did not load."""
    ignored: Mapping[str, str] = field(default_factory=dict)
    """Each section ignored with a warning, and the warning (also in ``warnings``)."""

    def section(self, name: str) -> BaseModel:
        """The section of core part or backend ``name``."""
        section = getattr(self.values, name, None)
        if not isinstance(section, BaseModel):
            raise KeyError(f"the config has no section {name!r}")
        return section

    def source(self, *path: str) -> str:
        """Where the value at ``path`` came from."""
        return self.sources.get(path, DEFAULT)

    def rows(self) -> Iterator[tuple[str, Any, str]]:
        """``(dotted field, value, source)`` for every field, in model order."""
        for name, value in self.values.model_dump(mode="json").items():
            if isinstance(value, dict):
                for field, inner in value.items():
                    yield f"{name}.{field}", inner, self.source(name, field)
            else:
                yield name, value, self.source(name)


def validate(
    raw: RawConfig,
    sections: Mapping[str, type[BaseModel]],
    installed: Collection[str] = (),
    files: tuple[Path, ...] = (),
    unchecked: Mapping[str, str] | None = None,
) -> Config:
    """Validate merged settings against the core fields and the backends' ``sections``.

    A section that no installed plugin could own is ignored with a warning; one that an
    installed but unloaded plugin owns (quarantined, disabled) is ignored, with a warning
    saying why where ``unchecked`` (section name to why) has it, else silently: the
    plugin's own state says why. Raises ``ConfigError`` naming the first invalid value,
    with every other one in its ``others``.
    """
    known = CORE_SECTIONS | SCALARS | sections.keys()
    nested: dict[str, Any] = {}
    ignored: dict[str, str] = {}
    problems: list[ConfigError] = []
    for path, setting in raw.items():
        head = path[0]
        problem = _key_problem(path, known) or _depth_problem(setting.value)
        if problem:
            problems.append(ConfigError(setting.source, ".".join(path), setting.value, problem))
        elif head not in known:
            ignored.setdefault(head, setting.source)
        elif len(path) == 1:
            nested[head] = setting.value
        else:
            nested.setdefault(head, {})[path[1]] = setting.value
    model = ZyxConfig.with_sections(sections)
    try:
        values = model.model_validate(nested)
    except ValidationError as error:
        problems += _config_errors(error, raw, model)
    except Exception as error:  # a plugin's validator with a bug, on the user's value
        raise _validator_error(error, raw, sections, nested) from error
    if problems:
        first = problems[0]
        raise ConfigError(
            first.source, first.field, first.value, first.problem, others=problems[1:]
        )
    unchecked = {name: why for name, why in (unchecked or {}).items() if name in ignored}
    notes = {
        name: f"section {name!r} (from {source}) is for a backend that is not installed; "
        f"ignored{_did_you_mean(name, known - SCALARS)}"
        if name not in installed
        else f"section {name!r} (from {source}) was not checked: {unchecked[name]}"
        for name, source in ignored.items()
        if name not in installed or name in unchecked
    }
    sources = {path: s.source for path, s in raw.items() if path[0] in known}
    return Config(values, sources, files, tuple(notes.values()), tuple(unchecked), notes)


def _did_you_mean(name: str, sections: Collection[str]) -> str:
    """``"; did you mean 'host'?"`` where ``name`` is close to one of ``sections``."""
    close = difflib.get_close_matches(name, sorted(sections), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _key_problem(path: FieldPath, known: Collection[str]) -> str:
    """What is wrong with where a setting is (a misspelt value, a value given as a
    section or a section as a value), or ``""``."""
    head = path[0]
    if head not in known and len(path) == 1:  # a misspelt value, not a section
        return f"unknown key; the config takes: {', '.join(sorted(known))}"
    if head in known and (head in SCALARS) != (len(path) == 1):
        if head in SCALARS:
            return f"{head} is a value, not a section"
        return f'{head} is a section: an object of fields, e.g. {{"enabled": true}}'
    return ""


def _depth_problem(value: Any) -> str:
    """``""``, unless ``value`` nests objects and lists deeper than ``MAX_DEPTH``
    (``zyx.configure()``'s values come from Python, not through JSON's parser)."""
    stack = [(value, 1)]
    while stack:  # no recursion: the value may be nested past Python's stack
        item, depth = stack.pop()
        if isinstance(item, (Mapping, list, tuple)):
            if depth > MAX_DEPTH:
                return f"objects and lists nested deeper than {MAX_DEPTH}"
            inner = item.values() if isinstance(item, Mapping) else item
            stack += [(part, depth + 1) for part in inner]
    return ""


def _config_errors(
    error: ValidationError, raw: RawConfig, model: type[BaseModel]
) -> list[ConfigError]:
    """Each problem of ``error`` as a ``ConfigError`` naming its source."""
    found = []
    for problem in error.errors():
        loc = tuple(problem["loc"])
        names = tuple(str(part) for part in loc if isinstance(part, str))
        source = next(
            (raw[names[:n]].source for n in range(len(names), 0, -1) if names[:n] in raw),
            DEFAULT,
        )
        message = problem["msg"]
        if problem["type"] == "extra_forbidden":
            section = ".".join(names[:-1]) or "the config"
            message = f"unknown key; {section} takes: " + ", ".join(_fields_at(model, names[:-1]))
        found.append(ConfigError(source, _dotted(loc), problem["input"], message))
    return found


def _validator_error(
    error: Exception, raw: RawConfig, sections: Mapping[str, type[BaseModel]], nested: Any
) -> ConfigError:
    """``error``, which a section's own validator raised, as a ``ConfigError`` naming the
    section (found by validating each alone) and where its values came from."""
    for name, section in sections.items():
        try:
            section.model_validate(nested.get(name, {}))
        except ValidationError:
            continue
        except Exception:
            source = next((s.source for path, s in raw.items() if path[0] == name), DEFAULT)
            problem = f"its validator failed: {type(error).__name__}: {error}"
            return ConfigError(source, name, nested.get(name, {}), problem)
    return ConfigError(DEFAULT, "(config)", nested, f"validation failed: {error!r}")


def _fields_at(model: type[BaseModel], path: FieldPath) -> list[str]:
    """The field names of the (sub)model at ``path``."""
    for name in path:
        annotation = model.model_fields[name].annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)


def _dotted(loc: tuple[int | str, ...]) -> str:
    """``("cuda", "device_ids", 1)`` to ``cuda.device_ids[1]``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else part
    return text
