"""Development sessions: one per backend, plus lint, typecheck, fuzz and demo.

``nox`` runs the sessions CI runs (core and core-3.12, opencl, cuda, cudnn, example, lint,
typecheck); ``nox -s fuzz``, ``nox -s bench`` or ``nox -s demo`` run the others. Each
session installs only the distributions it tests, so a test that imports a backend it did
not install fails loudly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from glob import glob

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = [
    "core", "core-3.12", "opencl", "cuda", "cudnn", "example", "lint", "typecheck",
]  # fmt: skip

CORE = "./zyx-core[test]"


UNBUILDABLE = "builds the smallest kernel"
"""zyx-opencl's reason where no driver here compiles anything (PoCL 3.0 on a CPU its LLVM
does not know): the machine's limit, not zyx's, as a missing GPU is."""

PROBE_OPEN = """
import zyx
try:
    zyx.device({backend!r})
    print("ok")
except Exception as error:
    print(error)
"""


def unbuildable(session: nox.Session, backend: str) -> str | None:
    """Why ``backend``'s compiler builds nothing on this machine (``UNBUILDABLE``), if so."""
    opened = session.run("python", "-c", PROBE_OPEN.format(backend=backend), silent=True)
    return opened.strip() if isinstance(opened, str) and UNBUILDABLE in opened else None


def conformance(session: nox.Session, backend: str) -> None:
    """Run the conformance suite that ships in zyx-core against ``backend``; skipped, with
    the reason, where its compiler builds nothing on this machine (``unbuildable``)."""
    why = unbuildable(session, backend)
    if why is not None:
        session.warn(f"conformance on {backend} skipped: {why}")
        return
    # Exit 5 (nothing collected) is a failure unless posargs selected tests (-k, -m) that
    # the suite does not have: without them, it means the suite itself was not found.
    session.run(
        "pytest", "--pyargs", "zyx.testing", "--zyx-backend", backend, *session.posargs,
        success_codes=[0, 5] if session.posargs else [0],
    )  # fmt: skip


@nox.session
def core(session: nox.Session) -> None:
    """zyx-core alone: its tests, and the conformance suite on the host backend."""
    # uv: the plugin tests install test plugins into a throwaway venv with it.
    session.install(CORE, "uv")
    session.run("pytest", "tests/core", "tests/conformance", "tests/fuzz", *session.posargs)
    conformance(session, "host")


def python_312() -> str | None:
    """A Python 3.12 that runs, on PATH or pyenv's: the GPU machine's version, which gets
    numpy 2.5 (3.11 stops at 2.4); ``None`` where there is none."""
    pyenv = sorted(glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))
    for candidate in [shutil.which("python3.12"), *pyenv]:
        if candidate and subprocess.run([candidate, "-c", ""], capture_output=True).returncode == 0:
            return candidate
    return None


PYTHON_312 = python_312()


@nox.session(name="core-3.12", python=PYTHON_312)
def core_312(session: nox.Session) -> None:
    """The core session under Python 3.12 (and the numpy it gets); skipped without one."""
    if PYTHON_312 is None:
        session.skip("no Python 3.12 on PATH or in pyenv")
    core(session)


@nox.session
def opencl(session: nox.Session) -> None:
    """zyx-opencl on PoCL, the CPU OpenCL platform from PyPI (no root, no system package)."""
    session.install(CORE, "./zyx-opencl", "pocl-binary-distribution")
    session.run("pytest", "tests/opencl", *session.posargs)
    # The fuzzer's smoke test on PoCL only: its host half runs in the core session. Posargs
    # that select tests (-k) may select none of these.
    session.run(
        "pytest", "tests/fuzz", "-m", "opencl", *session.posargs,
        success_codes=[0, 5] if session.posargs else [0],
    )  # fmt: skip
    conformance(session, "opencl")


FUZZERS = {
    "ir": ("tests/fuzz/fuzz.py", "host,opencl"),
    "arrays": ("tests/fuzz/arrays.py", "host,host-checked,gpu-shaped,opencl"),
}
"""The differential fuzzers: kernels against the IR interpreter, and array programs against
array_api_strict; each with the devices it runs on by default."""


@nox.session
def fuzz(session: nox.Session) -> None:
    """The differential fuzzers, for longer than their smoke tests: by default each for
    600 s on its devices (``FUZZERS``). ``nox -s fuzz -- arrays --seconds 60 --devices
    host-checked`` runs one with those options (``tests/fuzz/arrays.py --help``); options
    without a fuzzer's name go to both."""
    session.install(CORE, "./zyx-opencl", "pocl-binary-distribution")
    args = list(session.posargs)
    names = [args.pop(0)] if args and args[0] in FUZZERS else list(FUZZERS)
    for name in names:
        script, devices = FUZZERS[name]
        session.run("python", script, *(args or ["--seconds", "600", "--devices", devices]))


@nox.session
def cuda(session: nox.Session) -> None:
    """zyx-cuda: NVRTC compiles for real without a GPU; tests that need one skip."""
    session.install(CORE, "./zyx-cuda")
    session.run("pytest", "tests/cuda", *session.posargs)


@nox.session
def cudnn(session: nox.Session) -> None:
    """zyx-cudnn with zyx-cuda, as CI runs it: without libcudnn and without a GPU, so the
    matcher and the quarantine are tested, and the GPU tests skip. zyx-cudnn and the
    frontend go in without their dependencies: cuDNN itself (nvidia-cudnn-cu13) is the
    library this session runs without, and the frontend's CUTLASS DSL is half a gigabyte
    that the frontend's graph API does not import."""
    session.install(CORE, "./zyx-cuda")
    session.install("--no-deps", "./zyx-cudnn", "nvidia-cudnn-frontend>=1.32")
    session.run("pytest", "tests/cudnn", *session.posargs)


@nox.session
def example(session: nox.Session) -> None:
    """The out-of-tree example backend as a third party ships it: built from its own
    pyproject into a venv that holds only zyx-core, certified by the conformance suite,
    and type-checked with its own settings."""
    session.install(CORE, "./examples/zyx-example-backend", "mypy")
    conformance(session, "example")
    session.chdir("examples/zyx-example-backend")
    session.run("mypy")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff: lint rules and formatting, settings in the root pyproject.toml."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy on every package's src (files and settings in the root pyproject.toml).

    The packages are installed so mypy sees their dependencies' types, as in a developer's
    venv; all but zyx-cudnn, whose cuDNN frontend pulls in half a gigabyte of CUTLASS.
    """
    session.install("mypy", "-e", CORE, "-e", "./zyx-cuda", "-e", "./zyx-opencl")
    session.run("mypy", *session.posargs)


BENCHES = [
    ["benchmarks/host_vs_numpy.py", "--small"],
    ["benchmarks/opencl_bench.py", "--platform", "0", "--size-mib", "16", "--launches", "2000",
     "--repeats", "5", "--rounds", "9"],
    ["benchmarks/frontend_bench.py", "--device", "host", "--size-mib", "16"],
    ["benchmarks/frontend_bench.py", "--device", "opencl", "--size-mib", "16"],
    ["benchmarks/jit_bench.py", "--device", "host", "--repeats", "200", "--burst", "50"],
    ["benchmarks/launch_overhead.py", "--backend", "host", "--launches", "5000"],
    ["benchmarks/launch_overhead.py", "--backend", "opencl", "--launches", "5000"],
    ["benchmarks/reduce_bench.py", "--device", "host", "--size-mib", "16"],
    ["benchmarks/matmul_bench.py", "--device", "host", "--case", "f32:1024"],
]  # fmt: skip
"""What ``bench`` runs: the host's and PoCL's benchmarks at small sizes."""


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmarks this machine can run without a GPU (``BENCHES``: host and PoCL, small
    sizes; PoCL's skipped where it builds nothing here), their results taken into
    ``benchmarks/results/`` under this machine's name, then BENCHMARKS.md and the charts
    rendered from every results file there (the H200's come from ``scripts/gpu-check.sh``).
    Peers that are not installed are left out."""
    session.install(CORE, "./zyx-opencl", "pocl-binary-distribution", "matplotlib")
    out = session.create_tmp()
    no_opencl = unbuildable(session, "opencl")
    for bench in BENCHES:
        if no_opencl is not None and any("opencl" in word for word in bench):
            session.warn(f"{' '.join(bench)} skipped: {no_opencl}")
            continue
        session.run("python", *bench, env={"OUT": out})
    files = sorted(glob(f"{out}/*.json"))
    session.run("python", "benchmarks/report.py", "--add", *files)


@nox.session
def demo(session: nox.Session) -> None:
    """What a user sees after `pip install zyx-core`: the devices and the doctor's report."""
    session.install("./zyx-core")
    session.run("zyx", "devices")
    session.run("zyx", "doctor")
