"""ZYX_DEBUG turns zyx's logging channels on; without it zyx writes nothing anywhere."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from zyx import debug


@pytest.fixture(autouse=True)
def restore_loggers() -> Iterator[None]:
    yield
    for name in debug.CHANNELS.values():
        logger = logging.getLogger(name)
        logger.setLevel(logging.NOTSET)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)


def test_each_bit_is_one_channel() -> None:
    assert debug.channels(1 | 32) == ["zyx.dev", "zyx.launch"]
    assert debug.channels(511) == list(debug.CHANNELS.values())
    assert debug.channels(2) == []  # zyx has no channel 2 here


def test_setup_turns_named_channels_to_debug_with_one_stderr_handler() -> None:
    assert debug.setup({"ZYX_DEBUG": "0x48"}) == ["zyx.ir", "zyx.mem"]
    debug.setup({"ZYX_DEBUG": "72"})
    ir = logging.getLogger("zyx.ir")
    assert ir.level == logging.DEBUG and len(ir.handlers) == 1
    assert logging.getLogger("zyx.dev").level == logging.NOTSET


def test_without_zyx_debug_nothing_is_attached() -> None:
    assert debug.setup({}) == []
    assert all(not logging.getLogger(name).handlers for name in debug.CHANNELS.values())


def test_a_bad_mask_warns_and_turns_nothing_on() -> None:
    with pytest.warns(UserWarning, match="ZYX_DEBUG='lots' is not an integer"):
        assert debug.setup({"ZYX_DEBUG": "lots"}) == []


CODE = "import zyx; zyx.devices(); import logging; logging.getLogger('zyx.dev').warning('w')"


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=60
    )


def test_zyx_debug_logs_discovery_to_stderr(environ: dict[str, str]) -> None:
    done = run({**environ, "ZYX_DEBUG": "1"})
    assert done.returncode == 0, done.stderr
    assert "zyx.dev: plugin host (zyx.host.plugin): loaded" in done.stderr
    assert done.stdout == ""


def test_library_prints_nothing_without_zyx_debug(environ: dict[str, str]) -> None:
    done = run(environ)
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("", "")


def test_import_zyx_configures_no_logging(environ: dict[str, str]) -> None:
    """``ZYX_DEBUG`` takes effect when zyx first opens its registry, not at ``import zyx``:
    importing a library leaves the application's logging as it was."""
    code = "import logging, zyx; d = logging.getLogger('zyx.dev'); print(d.level, d.handlers)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**environ, "ZYX_DEBUG": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.stdout, done.stderr) == ("0 []\n", "")


PROGRAM = """
import numpy as np, zyx
x = zyx.asarray(np.arange(6.0, dtype=np.float32).reshape(2, 3), device="host")
print(zyx.sum(x * 2 + 1, axis=1).numpy().tolist())
"""


def test_every_channel_logs_a_small_program(environ: dict[str, str], tmp_path: Path) -> None:
    """A front-end program on the host, its kernel compiled anew, with every bit on: each
    channel says something (the IR listing, the C source, the plan, the launch, memory,
    the compiler), and stdout holds only what the program printed."""
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        env={**environ, "ZYX_DEBUG": "511", "ZYX_CACHE_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[9.0, 27.0]\n"
    quiet = [n for n in debug.CHANNELS.values() if f" {n}: " not in done.stderr]
    assert set(quiet) <= {"zyx.tune"}, done.stderr[-3000:]  # tune: where a search ran
    assert " zyx.ir: kernel " in done.stderr  # the listing
