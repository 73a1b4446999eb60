"""The ``zyx`` command: ``devices``, ``doctor``, ``config show``, ``config validate``, ``check``,
``conformance``, ``tune``.

A user error (bad config, unusable backend) prints one message in red and exits 1, never
a traceback; a traceback means a bug in zyx or a plugin. ``zyx doctor`` exits 1 too where
it reports a problem. Output stays readable at 80 columns: long names go below tables,
not into their cells.
"""

from __future__ import annotations

import functools
import json
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, ParamSpec, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import zyx
from zyx.backend import Device
from zyx.config import Config, read_file
from zyx.dtypes import DTypeCapability
from zyx.errors import ConfigError, ZyxError
from zyx.hookspecs import PLUGIN_API_VERSION
from zyx.native import status as native_status
from zyx.plugins import BackendRecord, State, registry

app = typer.Typer(
    help="zyx: a compute framework whose backends are plugins.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
config_app = typer.Typer(help="Show or validate the configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

_STATE_STYLE = {State.LOADED: "green", State.QUARANTINED: "red", State.DISABLED: "yellow"}

P = ParamSpec("P")
R = TypeVar("R")


def user_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn a ``ZyxError`` raised by ``command`` into a red message and exit status 1."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except ZyxError as error:
            # soft_wrap: the terminal wraps; paths and names stay whole when copied.
            err.print(f"[red]error: {escape(describe(error))}[/red]", soft_wrap=True)
            raise typer.Exit(1) from None

    return run


def _version(asked: bool) -> None:
    if asked:
        major, minor = PLUGIN_API_VERSION
        out.print(f"zyx-core {zyx.__version__}, plugin API {major}.{minor}")
        raise typer.Exit()


@app.callback()
def options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    """zyx: a compute framework whose backends are plugins."""


def describe(error: BaseException) -> str:
    """The error's message, and that of the exception that caused it unless it says so."""
    cause, text = error.__cause__, str(error)
    return (
        f"{text} (caused by {type(cause).__name__}: {cause})"
        if cause and str(cause) not in text
        else text
    )


@app.command()
@user_errors
def devices() -> None:
    """List the devices of every usable backend."""
    reg = registry()
    found = reg.devices()
    if not found:
        err.print("[red]error: no backend opened a device; `zyx doctor` says why[/red]")
        raise typer.Exit(1)
    table = Table("backend", box=box.SIMPLE_HEAD)
    # The device string is what users type: never shorten it.
    table.add_column("device", min_width=max(len(device.name) for device in found))
    for heading in ("memory", "compute", "local threads", "warp"):
        table.add_column(heading, justify="right", no_wrap=True)
    for device in found:
        table.add_row(*_device_row(device))
    out.print(table)
    # Names and dtype lists are long: on lines of their own, they wrap as text does.
    for device in found:
        out.print(f"{escape(device.name)}: {escape(device.info.name)}")
        out.print(f"  dtypes: {' '.join(_stored_dtypes(device))}")
    unusable = [b for b in reg.backends() if not b.usable]
    for backend in unusable:
        out.print(f"[yellow]{backend.name}: {backend.state.value} (see `zyx doctor`)[/yellow]")


def _device_row(device: Device) -> list[str]:
    info = device.info
    return [
        device.backend,
        device.name,
        _bytes(info.global_mem_size),
        f"{info.compute / 1e12:.2f} TFLOP/s",
        str(info.max_local_threads),
        str(info.warp_size),
    ]


def _stored_dtypes(device: Device) -> list[str]:
    caps = device.info.dtypes
    return [d.value for d, cap in caps.items() if cap & DTypeCapability.STORAGE]


@app.command()
@user_errors
def doctor(
    explain: Annotated[
        bool, typer.Option("--explain", help="Also say which device zyx.device() picks, and why.")
    ] = False,
) -> None:
    """Show each plugin's state and why, the native libraries found, and the config read.
    Exits 1 where something is quarantined or the configured default device is unusable."""
    reg = registry()
    major, minor = PLUGIN_API_VERSION
    out.print(
        f"zyx-core {zyx.__version__}, plugin API {major}.{minor}, "
        f"Python {platform.python_version()} on {platform.platform()}"
    )
    reg.devices()  # opening the backends is what shows whether they work
    out.print("\n[bold]plugins[/bold]")
    for p in reg.plugins():
        _print_standing(f"{p.name} ({p.distribution or p.target})", p.state, p.reason)
    out.print("\n[bold]backends[/bold]")
    for b in reg.backends():
        _print_standing(f"{b.name} (plugin {b.plugin}, priority {b.priority})", b.state,
                        b.reason, _devices_note(b))  # fmt: skip
        # What opening found, which a probe cannot know (the host's compiler may not work).
        for device in b.devices or ():
            out.print(f"      {escape(device.name)}: {escape(device.info.name)}")
    out.print("\n[bold]native libraries[/bold]")
    libraries = [(b.name, lib, where) for b in reg.backends() if b.probe
                 for lib, where in b.probe.libraries.items()]  # fmt: skip
    for backend, library, where in libraries:
        out.print(f"  {backend}: {escape(library)}: {escape(where)}")
    if not libraries:
        out.print("  none reported")
    _print_native()
    out.print("\n[bold]config[/bold]")
    _print_config(reg.config, reg.warnings)
    problems = [
        f"{kind} {record.name} is quarantined"
        for kind, records in (("plugin", reg.plugins()), ("backend", reg.backends()))
        for record in records
        if record.state is State.QUARANTINED
    ]
    if reg.config.values.default_device is not None and not _print_default_device():
        problems.append("the configured default_device is unusable")
    if explain:
        device, why = reg.choose()
        out.print(f"\n[bold]default device[/bold]: {escape(device.name)}")
        for step in why:
            out.print(f"  {escape(step)}")
    if problems:
        count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
        out.print(f"\n[red]{count}: {escape('; '.join(problems))}[/red]")
        raise typer.Exit(1)


def _print_native() -> None:
    """zyx's own C modules (``zyx.native``): in use, or why the Python path runs."""
    import zyx.runtime  # noqa: F401  # it loads the front end's modules; devices, theirs

    out.print("\n[bold]zyx's C modules[/bold] (faster paths; Python runs where one is off)")
    for name, why in sorted(native_status().items()):
        state = "[green]in use[/green]" if why is None else f"[yellow]off[/yellow]: {escape(why)}"
        out.print(f"  {name}: {state}", soft_wrap=True)


def _print_default_device() -> bool:
    """Say whether the configured ``default_device`` names a device that opened; return it."""
    try:
        device, why = registry().choose()
    except ZyxError as error:
        out.print(f"  [red]error: {escape(describe(error))}[/red]", soft_wrap=True)
        return False
    out.print(f"  {escape(why[0])}: [green]{escape(device.name)}[/green]")
    return True


def _print_standing(title: str, state: State, reason: str, note: str = "") -> None:
    """One line per plugin or backend, and its reason indented below it."""
    style = _STATE_STYLE[state]
    note = f": {escape(note)}" if note else ""
    out.print(f"  {escape(title)}: [{style}]{state.value}[/{style}]{note}")
    if reason:
        out.print(f"      {escape(reason)}")


def _devices_note(backend: BackendRecord) -> str:
    if backend.devices is not None:
        return ", ".join(d.name for d in backend.devices) or "no devices selected"
    if backend.probe is None:
        return ""
    seen = f"{backend.probe.devices} device{'s' if backend.probe.devices != 1 else ''} seen"
    note = backend.probe.reason
    # A probe's reason that quarantined the backend is printed below it already.
    return f"{seen}, {note}" if note and note != backend.reason else seen


def _print_config(config: Config, warnings: list[str]) -> None:
    files = ", ".join(map(str, config.files)) or "none (defaults and environment only)"
    out.print(f"  files read: {escape(files)}")
    for warning in warnings:
        out.print(f"  [yellow]warning: {escape(warning)}[/yellow]")


@config_app.command("show")
@user_errors
def config_show() -> None:
    """Show the effective configuration and where each value came from."""
    reg = registry()
    table = Table("field", "value", "source")
    for field, value, source in reg.config.rows():
        table.add_row(field, escape(json.dumps(value)), escape(source))  # JSON, as written
    out.print(table)
    _print_config(reg.config, reg.warnings)


@config_app.command("validate")
@user_errors
def config_validate(
    file: Annotated[Path, typer.Argument(help="a zyx config.json to check")],
) -> None:
    """Check a config file against the sections of every installed plugin, whatever
    ZYX_PLUGINS or ZYX_DISABLE_PLUGIN_AUTOLOAD say (those it disables are imported for it)."""
    reg = registry()
    try:
        checked = reg.check_config(read_file(file, required_by="zyx config validate"), (file,))
    except ConfigError as error:  # every problem, one line each: the user fixes them at once
        for problem in error.problems:
            err.print(f"[red]error: {escape(problem.alone)}[/red]", soft_wrap=True)
        raise typer.Exit(1) from None
    for warning in checked.warnings:
        out.print(f"[yellow]warning: {escape(warning)}[/yellow]")
    if checked.unchecked:
        names = ", ".join(checked.unchecked)
        out.print(
            f"[yellow]{escape(str(file))}: valid where checked; not checked: {names}[/yellow]"
        )
    else:
        out.print(f"[green]{escape(str(file))} is valid[/green]")


@app.command()
@user_errors
def check(
    backend: Annotated[
        str | None, typer.Argument(help="backend to check; default: every usable one")
    ] = None,
) -> None:
    """Run zyx's self-check on a backend (or on all) and report the result."""
    from zyx.check import run

    raise typer.Exit(run(backend))


@app.command()
@user_errors
def conformance(
    backend: Annotated[str, typer.Argument(help="device to certify: example, opencl, cuda:1, ...")],
    pytest_args: Annotated[
        list[str] | None, typer.Argument(help="after --, passed to pytest: -- -k dtype -x")
    ] = None,
) -> None:
    """Run the conformance suite on a backend: results per area, and what the run certifies.

    Exits with pytest's status where it is not 0; else 0 where the run certifies the device
    and 6 where it certifies nothing (the IR interpreter, no f32, most tests skipped).
    """
    try:
        from zyx.conformance import run_isolated
    except ModuleNotFoundError as error:
        if error.name != "pytest":
            raise
        raise ZyxError(
            "zyx conformance runs the suite with pytest: pip install 'zyx-core[test]'"
        ) from None
    report = run_isolated(backend, pytest_args or ())
    out.print(report.renderable())
    raise typer.Exit(report.command_status)


@app.command()
@user_errors
def tune(
    clear: Annotated[bool, typer.Option("--clear", help="Remove every entry.")] = False,
) -> None:
    """Show the tuning cache (the variant kernel search chose per kernel and device), or
    clear it."""
    from zyx.tuning import cache

    if clear:
        out.print(f"removed {cache.clear()} entries from {escape(str(cache.folder))}")
        return
    stored = cache.entries()
    table = Table("kernel", "device", "variant", "vs default", "timed", "search", box=box.SIMPLE)
    readable = [(s.entry, s) for s in stored if s.entry is not None]
    damaged = len(stored) - len(readable)
    for entry, item in sorted(readable, key=lambda pair: (pair[0].device, pair[0].kernel)):
        variants = item.parts["variants"]
        default = entry.times.get(variants[0]) if variants else None
        won = entry.times.get(entry.variant)
        gain = f"{default / won:.2f}x" if default and won else ""
        table.add_row(escape(entry.kernel), escape(entry.device), escape(entry.variant), gain,
                      str(len(entry.times)), f"{entry.seconds:.2f} s")  # fmt: skip
    out.print(f"{len(stored)} entries in {escape(str(cache.folder))}")
    if stored and damaged < len(stored):
        out.print(table)
    if damaged:
        out.print(f"[yellow]{damaged} unreadable entries: ignored (zyx tune --clear)[/yellow]")


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def main() -> None:
    """Entry point of the ``zyx`` script."""
    app()
