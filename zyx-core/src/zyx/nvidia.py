"""What zyx knows of NVIDIA GPUs beyond what their APIs report, for every backend that
reaches them (zyx-cuda, and zyx-opencl on NVIDIA's OpenCL), so both describe one GPU
the same way."""

from __future__ import annotations

_FP32_LANES = {(6, 0): 64, (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64}
"""FP32 FMA lanes per SM where they are not 128 (GP100, Volta, Turing, A100)."""


def peak_flops(sms: int, clock_hz: float, compute_capability: tuple[int, int]) -> float:
    """Peak f32 FLOP/s: SMs × FP32 lanes per SM × clock × 2 (an FMA counts two)."""
    return 2.0 * sms * _FP32_LANES.get(compute_capability, 128) * clock_hz


def register_bytes(registers_per_block: int) -> int:
    """Register bytes one thread may hold: 255 32-bit registers (the architectural cap), as
    long as a warp's worth fits in the block's register file."""
    return 4 * min(255, registers_per_block // 32)
