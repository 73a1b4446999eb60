"""How close each single op's results come to their per-element budgets in the conformance
suite (``zyx.testing.kernels.ulp_budget``): the largest error, in ulps of the output dtype,
over many random inputs from each op's test domain, on one device.

    python benchmarks/ulp_margins.py cuda            # or opencl, host, ...

Prints, per float dtype, every op or cast whose largest error is over half an ulp (the
rest are correctly rounded there) as ``name=largest/budget``; ``FAIL`` marks one over its
budget.
"""

from __future__ import annotations

import argparse

import numpy as np

import zyx
from zyx.dtypes import DType
from zyx.testing.harness import run_elementwise
from zyx.testing.kernels import binary, binary_ops, cast, unary, unary_ops
from zyx.testing.numerics import ulps


def margins(device_name: str, n: int, seed: int) -> None:
    device = zyx.device(device_name)
    rng = np.random.default_rng(seed)
    for dtype in (DType.F16, DType.BF16, DType.F32, DType.F64):
        parts = [unary(op, dtype) for op in unary_ops(dtype)]
        parts += [binary(op, dtype) for op in binary_ops(dtype) if not op.is_comparison]
        parts += [cast(src, dtype) for src in DType if src is not dtype]
        parts = [p for p in parts if p.supported(device.info)]
        if not parts:
            print(dtype, "not claimed")
            continue
        outcomes = run_elementwise(device, f"margins_{dtype}", parts, n, rng)
        row = []
        for part in parts:
            outcome = outcomes[part.name]
            largest = float(np.max(ulps(outcome.out, outcome.ref, dtype)))
            over = part.ulps is not None and largest > part.ulps
            if largest > 0.5001 or over:
                row.append(f"{part.name}={largest:.3g}/{part.ulps:.4g}{' FAIL' if over else ''}")
        print(dtype, " ".join(row) or "all correctly rounded")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("device", help="device string: cuda, opencl, host, ...")
    parser.add_argument("--elements", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    margins(args.device, args.elements, args.seed)


if __name__ == "__main__":
    main()
