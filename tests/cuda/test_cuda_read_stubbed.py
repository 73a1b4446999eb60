"""A CUDA pool's read on the stand-in driver (``stub_driver``, in a process of its own),
with zyx-cuda's native module and without it (``ZYX_NATIVE=0``): the read of a result
runs through the path expected, and a read that does not fit its buffer or whose output is
read-only is refused before any copy starts. No GPU, so no value is compared
(``test_staging.py`` compares both paths' values on a fake driver). Needs a C compiler."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from stub_driver import run_stubbed

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on PATH"),
]

HERE = Path(__file__).parent


@pytest.mark.parametrize("native", ["1", "0"])
def test_reads_are_checked_before_any_copy(native: str) -> None:
    out = run_stubbed(Path(__file__), native)
    assert out == "ok\n", out


def main(native: str) -> str:
    os.environ["ZYX_NATIVE"] = native
    sys.path.insert(0, str(HERE))
    from stub_driver import install

    install()
    import numpy as np

    import zyx
    from zyx.errors import BackendError, ErrorStatus

    device = zyx.device("cuda")
    a = zyx.asarray(np.ones(1024, np.float32), device=device)
    pool = a.node.buffer.pool  # type: ignore[union-attr]
    assert (pool.staging._native is not None) == (native == "1")
    downloads = []
    download = pool.staging.download
    pool.staging.download = lambda *args: (downloads.append(args), download(*args))[0]
    read = (a + a).numpy()
    assert read.shape == (1024,) and read.dtype == np.float32 and len(downloads) == 1
    buf = pool.allocate(4096)
    refused = {
        "do not fit": np.empty(1025, np.float32),
        "read-only": np.empty(1024, np.float32),
    }
    refused["read-only"].flags.writeable = False
    for message, out in refused.items():
        try:
            pool.read(buf, out)
        except BackendError as error:
            assert error.status is ErrorStatus.MEMORY_COPY_P2H and message in str(error)
        else:
            return f"a read into {message} output was not refused"
    pool.release(buf)
    return "ok" if len(downloads) == 1 else f"{len(downloads)} downloads"


if __name__ == "__main__":
    print(main(sys.argv[1]))
