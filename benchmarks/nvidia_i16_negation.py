"""A probe of NVIDIA's compiler (run it on an NVIDIA GPU with cupy): does it keep the wrap
of a 16-bit negation, ``r = -x`` with ``r > 0`` for ``x = MIN``?

    python benchmarks/nvidia_i16_negation.py

Prints one line per way of writing ``r`` (and for i8 and i32 alike): ``ok``, or ``WRONG``
with what the GPU gave. zyx's CDialect.negate writes it the way that is ``ok``.
"""

from __future__ import annotations

import cupy as cp
import numpy as np

CASES = {
    "i16, through unsigned": ("short", "short r = (short)(0u - (unsigned)x);"),
    "i16, plain": ("short", "short r = -x;"),
    "i16, a select of MIN": ("short", "short r = (x == (short)-32768) ? x : (short)(-x);"),
    "i16, volatile": ("short", "volatile short v = (short)(0u - (unsigned)x); short r = v;"),
    "i16, sign-extended by shifts (zyx)": (
        "short",
        "short r = (short)(((int)((0u - (unsigned)x) << 16)) >> 16);",
    ),
    "i8, through unsigned": ("signed char", "signed char r = (signed char)(0u - (unsigned)x);"),
    "i32, through unsigned": ("int", "int r = (int)(0u - (unsigned)x);"),
}
NUMPY = {"short": np.int16, "signed char": np.int8, "int": np.int32}


def main() -> None:
    for name, (ctype, body) in CASES.items():
        dtype = NUMPY[ctype]
        info = np.iinfo(dtype)
        xs = np.array([info.min, info.min + 1, -1, 0, 1, info.max, 5, info.min], dtype)
        source = (
            f'extern "C" __global__ void k(const {ctype}* p, int* o) {{ int i = threadIdx.x;'
            f" {ctype} x = p[i]; {body} o[i] = r > 0; }}"
        )
        kernel = cp.RawKernel(source, "k")
        out = cp.zeros(len(xs), cp.int32)
        kernel((1,), (len(xs),), (cp.asarray(xs), out))
        got = out.get()
        want = ((-(xs.astype(np.int64))).astype(dtype) > 0).astype(np.int32)
        wrong = f"WRONG {got.tolist()}, want {want.tolist()}"
        verdict = "ok" if np.array_equal(got, want) else wrong
        print(f"{name:36} {verdict}")


if __name__ == "__main__":
    main()
