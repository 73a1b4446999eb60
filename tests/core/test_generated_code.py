"""The launch paths' generated functions (``zyx.backend.generate``) read like files in
tracebacks and in the ``zyx.asm`` log, for as long as they live."""

from __future__ import annotations

import gc
import linecache
import logging
import traceback

import pytest

from zyx.backend import generate
from zyx.dtypes import DType
from zyx.errors import BackendError
from zyx.host.device import HostDevice
from zyx.host.pool import HostPool
from zyx.testing.kernels import axpb


def test_a_traceback_through_generated_code_shows_its_lines() -> None:
    device = HostDevice(HostPool())
    program = device.compile(axpb(DType.F32))
    with pytest.raises(BackendError) as caught:
        program.inspect([1, 2])
    frames = traceback.extract_tb(caught.value.__traceback__)
    generated = [f for f in frames if f.filename.startswith("<zyx: inspect axpb_f32")]
    assert generated, "the generated frame is in the traceback"
    assert (generated[-1].line or "").startswith("raise ")


def test_the_source_goes_with_the_function() -> None:
    function = generate(["def half(x):", "    return x / 2"], {}, "half")
    (filename,) = [f for f in linecache.cache if f.startswith("<zyx: half #")]
    assert linecache.getline(filename, 2) == "    return x / 2\n"
    del function
    gc.collect()
    assert filename not in linecache.cache


def test_zyx_debug_16_logs_the_generated_source(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="zyx.asm"):
        generate(["def twice(x):", "    return 2 * x"], {}, "twice")
    assert any("<zyx: twice #" in m and "return 2 * x" in m for m in caplog.messages)


def test_two_functions_of_one_label_keep_their_own_source() -> None:
    one = generate(["def f():", "    return 1"], {}, "same")
    two = generate(["def f():", "    return 2"], {}, "same")
    assert one() == 1 and two() == 2
    lines = {linecache.getline(f.__code__.co_filename, 2).strip() for f in (one, two)}
    assert lines == {"return 1", "return 2"}
