"""The conformance suite fails on broken backends: each fault of ``faulty_backend`` makes
the tests that guard against it fail, and the same tests pass on the unbroken device."""

from __future__ import annotations

import os
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from rich.console import Console

import zyx.plugins
import zyx.testing
from zyx.conformance import NOT_CERTIFIED, Outcome, Report, run
from zyx.plugins import ENTRY_POINT_GROUP, Registry
from zyx.testing.certificate import INTERPRETED

FAULTY = EntryPoint("faulty", "faulty_backend", ENTRY_POINT_GROUP)
SUITE = Path(zyx.testing.__file__).parent

pytestmark = pytest.mark.usefixtures("faulty")

CAUGHT_BY = {
    "sub computes add": [
        "test_numerics.py::test_binary[sub-f32]",
        "test_numerics.py::test_binary[sub-i32]",
    ],
    "exp computes exp2": [
        "test_numerics.py::test_unary[exp-f32]",
        "test_numerics.py::test_unary[exp-f64]",
    ],
    "less-than computes greater-or-equal": [
        "test_numerics.py::test_binary[cmplt-f32]",
        "test_numerics.py::test_binary[cmplt-u8]",
    ],
    "half the groups": [
        "test_device.py::test_group_count_follows_a_variable",
        "test_dtypes.py::test_cast[i32-f32]",
    ],
    "barriers dropped": [
        "test_device.py::test_work_group_tree_reduction[f32]",
        "test_device.py::test_tiled_matmul",
    ],
    "every 7th launch skipped": ["test_device.py::test_dependent_launches_in_sequence"],
    "launch_timed returns 0": ["test_device.py::test_launch_timed_drains_then_times"],
    "set_arg ignored": ["test_device.py::test_recording_replays_with_rebound_arguments"],
    "limits unenforced": [
        "test_errors.py::test_local_size_over_the_limit_is_refused",
        "test_errors.py::test_local_memory_over_the_limit_is_refused",
    ],
    "arguments unchecked": [
        "test_errors.py::test_bad_launch_arguments_are_refused[launch-too many]",
        "test_errors.py::test_bad_launch_arguments_are_refused[record-buffer of another pool]",
    ],
    "writes take the caller's data late": [
        "test_pool.py::test_the_caller_may_change_its_data_once_write_returns",
    ],
    "reads ignore the offset": ["test_pool.py::test_partial_read_returns_that_range[5-17]"],
    "writes ignore the offset": [
        "test_pool.py::test_write_at_offset_changes_only_that_range[13-1000]"
    ],
    "copies do nothing": [
        "test_pool.py::test_copy_within_the_pool",
        "test_pool.py::test_copy_from_the_host_pool",
    ],
    "out of memory raises MemoryError": [
        "test_errors.py::test_out_of_memory_leaves_the_pool_usable"
    ],
    "free bytes drift": ["test_pool.py::test_free_bytes_follow_allocations"],
    "release frees at once": ["test_pool.py::test_retained_buffer_lives_until_its_last_release"],
    "ranges unchecked": [
        "test_errors.py::test_write_out_of_range_is_refused[4096-4]",
        "test_errors.py::test_read_out_of_range_is_refused[-1-4]",
    ],
    "f64 scalars passed as f32": ["test_dtypes.py::test_variable_scalars[f64]"],
    "f32 and f64 scalars rounded to f16": [
        "test_dtypes.py::test_variable_scalars[f32]",
        "test_dtypes.py::test_variable_scalars[f64]",
    ],
    "64-bit int scalars truncated to 32 bits": [
        "test_dtypes.py::test_variable_scalars[i64]",
        "test_dtypes.py::test_variable_scalars[u64]",
    ],
    "16- and 32-bit int scalars truncated to 8 bits": [
        "test_dtypes.py::test_variable_scalars[i16]",
        "test_dtypes.py::test_variable_scalars[u32]",
    ],
    "numpy float scalars lose their fraction": [
        "test_dtypes.py::test_numpy_scalars_are_variables_too[f32]",
        "test_dtypes.py::test_numpy_scalars_are_variables_too[f64]",
    ],
    "float scalars past their range saturate": [
        "test_errors.py::test_float_variable_past_float64_is_refused_and_past_its_dtype_is_infinite",
    ],
    "int scalars unchecked": [
        "test_errors.py::test_int_variable_out_of_range_is_refused[i32-1099511627776]",
        "test_errors.py::test_int_variable_out_of_range_is_refused[u32--1]",
    ],
    "int-float casts through i8": [
        "test_dtypes.py::test_cast[i32-f32]",
        "test_dtypes.py::test_cast[f64-i16]",
    ],
    "bool x / 0 and x % 0 give 1": [
        "test_numerics.py::test_binary[div-bool]",
        "test_numerics.py::test_binary[mod-bool]",
    ],
    "f16 results keep only bf16 precision": [
        "test_numerics.py::test_binary[mul-f16]",
        "test_numerics.py::test_unary[sqrt-f16]",
    ],
    "bf16 results truncated, not rounded": [
        "test_numerics.py::test_binary[add-bf16]",
        "test_numerics.py::test_unary[exp-bf16]",
        "test_dtypes.py::test_cast[f32-bf16]",
    ],
    "f32 sin reduced by a float 2 pi": ["test_numerics.py::test_unary[sin-f32]"],
    "float max as a > b ? a : b": [
        "test_numerics.py::test_special_values[max-f32]",
        "test_numerics.py::test_special_values[max-f64]",
    ],
    "a >= b as !(a < b)": [
        "test_numerics.py::test_special_values[cmpge-f32]",
        "test_numerics.py::test_special_values[cmpge-bf16]",
    ],
    "float negation as 0 - x": [
        "test_numerics.py::test_special_values[neg-f32]",
        "test_numerics.py::test_special_values[neg-f16]",
    ],
    "f16 results saturate at 65504": [
        "test_numerics.py::test_special_values[mul-f16]",
        "test_numerics.py::test_special_values[exp-f16]",
    ],
    "f32 results flush subnormals to zero": [
        "test_numerics.py::test_subnormals[mul-f32]",
        "test_numerics.py::test_subnormals[add-f32]",
    ],
    "zero work-groups raise": ["test_device.py::test_zero_work_groups_do_nothing"],
    "limits overstated": [
        "test_device.py::test_a_group_of_max_local_threads",
        "test_device.py::test_local_memory_up_to_the_limit",
    ],
}
"""Each fault, and tests of the suite that must fail on it."""


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A compiler cache of this module's own: faulty kernels never reach the user's, and
    the tests share the kernels they have in common."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def faulty(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache: Path) -> None:
    """The process registry replaced by one holding only ``faulty_backend``, importable
    from this folder, in an environment without zyx variables or config file, with a
    compiler cache of its own."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ZYX_")}
    environ.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path))
    monkeypatch.setenv("ZYX_CACHE_DIR", str(cache))
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    monkeypatch.setattr(zyx.plugins, "_registry", Registry(environ, [FAULTY]))


def run_suite(tests: list[str], fault: str = "", **device: object) -> Report:
    """The suite's ``tests`` (``module::test id``, or a module) on the faulty device;
    ``device`` sets the other fields of its section (``narrow``, ``claims``, ...)."""
    zyx.plugins.configure(faulty={"fault": fault, **device})
    return run("faulty", suite=[str(SUITE / test) for test in tests])


@pytest.mark.parametrize("fault", list(CAUGHT_BY))
def test_the_suite_fails_on(fault: str) -> None:
    report = run_suite(CAUGHT_BY[fault], fault)
    failed = {_id(r.test) for r in report.with_outcome(Outcome.FAILED)}
    missed = [test for test in CAUGHT_BY[fault] if test not in failed]
    assert not missed, f"{fault!r} went unnoticed by {missed}:\n{report.output}"


def test_the_same_tests_pass_without_a_fault() -> None:
    tests = sorted({test for tests in CAUGHT_BY.values() for test in tests})
    report = run_suite(tests)
    passed = {_id(r.test) for r in report.with_outcome(Outcome.PASSED)}
    assert passed >= set(tests), report.output


def test_a_device_with_small_limits_passes() -> None:
    """Kernels are sized to the device's limits, or their tests skip: on a device of
    one-dimensional groups of 32 work-items, the device and errors areas pass."""
    report = run_suite(["test_device.py", "test_errors.py"], narrow=True)
    outcomes = {_id(r.test): r.outcome for r in report.results}
    assert not report.with_outcome(Outcome.FAILED), report.output
    assert outcomes["test_device.py::test_three_axis_groups"] is Outcome.PASSED
    assert outcomes["test_device.py::test_a_group_of_max_local_threads"] is Outcome.PASSED
    assert outcomes["test_device.py::test_tiled_matmul"] is Outcome.SKIPPED


def test_a_device_of_one_work_item_per_group_passes_the_group_count_test() -> None:
    """The suite's own bug: ``local - 1`` elements made a 0-byte buffer there."""
    report = run_suite(["test_device.py::test_group_count_follows_a_variable"], single=True)
    assert [r.outcome for r in report.results] == [Outcome.PASSED], report.output


def test_a_run_certifies_what_the_device_claims() -> None:
    report = run_suite(["test_pool.py"])
    assert report.certified and report.command_status == 0, report.refusals()
    assert report.claims is not None and report.claims.device == "faulty"
    summary = report.claims.summary()
    assert "f32 (storage/arithmetic/math)" in summary and "max_local_threads" in summary
    assert "certified: faulty" in _rendered(report)


def test_a_backend_that_claims_no_dtype_is_not_certified() -> None:
    """It passed 73 tests and skipped 826, and zyx conformance exited 0."""
    report = run_suite(["test_pool.py", "test_dtypes.py"], claims=[])
    assert report.ok and not report.certified
    assert report.command_status == NOT_CERTIFIED
    reasons = "; ".join(report.refusals())
    assert "does not claim f32 arithmetic" in reasons and "most of the suite" in reasons
    assert "NOT certified" in _rendered(report)


def test_a_run_that_skipped_most_of_its_tests_is_not_certified() -> None:
    report = run_suite(["test_dtypes.py"], claims=["f32", "i32"])
    skipped = len(report.with_outcome(Outcome.SKIPPED))
    assert report.ok and skipped > len(report.results) / 2
    assert report.refusals() == [
        f"{skipped} of its {len(report.results)} tests skipped: most of the suite did not run"
    ]


def test_the_interpreter_is_labelled_and_certifies_nothing() -> None:
    """The host without a C compiler compared the reference with itself."""
    report = run_suite(["test_pool.py", "test_device.py::test_tiled_matmul"], interpret=True)
    assert report.ok and report.claims is not None and report.claims.interpreted
    assert report.refusals() == [f"faulty {INTERPRETED}"]
    assert "zyx conformance: faulty (IR interpreter)" in _rendered(report)


def _rendered(report: Report) -> str:
    console = Console(record=True, width=300)
    console.print(report.renderable())
    return " ".join(console.export_text().split())  # a table's title wraps to its width


def _id(nodeid: str) -> str:
    """``module::test id`` of a node id, whatever path it starts with."""
    path, _, test = nodeid.partition("::")
    return f"{Path(path).name}::{test}"
