"""What the process may use of the host: its memory limits (RLIMIT_AS, cgroups v1 and v2)
and the stack its threads get, and the host pool's capacity under them."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from zyx.host import limits
from zyx.host.limits import memory_headroom, thread_stack_bytes
from zyx.host.pool import HostPool, physical_memory


def fake_proc(tmp_path: Path, cgroup: str) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "statm").write_text("1000 400 300 5 0 100 0\n")
    return proc


def write(folder: Path, **files: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("_", ".", 1)).write_text(text + "\n")


@pytest.fixture
def no_address_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's own RLIMIT_AS out of the way: the cgroup alone decides."""
    unlimited = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    monkeypatch.setattr(limits.resource, "getrlimit", lambda which: unlimited)


def test_the_tightest_v2_cgroup_of_the_ancestors_decides(
    tmp_path: Path, no_address_limit: None
) -> None:
    proc = fake_proc(tmp_path, "0::/user/job\n")
    cgroups = tmp_path / "cgroup"
    write(cgroups / "user" / "job", memory_max="max", memory_current="100")
    write(cgroups / "user", memory_max="1000000", memory_current="400000")
    assert memory_headroom(proc, cgroups) == 600_000


def test_a_v1_memory_cgroup_counts_and_its_no_limit_does_not(
    tmp_path: Path, no_address_limit: None
) -> None:
    proc = fake_proc(tmp_path, "4:memory:/job\n3:cpuset:/\n")
    cgroups = tmp_path / "cgroup"
    unlimited = "9223372036854771712"
    write(cgroups / "memory", memory_limit_in_bytes=unlimited, memory_usage_in_bytes="5")
    assert memory_headroom(proc, cgroups) is None
    write(cgroups / "memory" / "job", memory_limit_in_bytes="3000", memory_usage_in_bytes="1000")
    assert memory_headroom(proc, cgroups) == 2000


def test_no_limit_anywhere_is_none(tmp_path: Path, no_address_limit: None) -> None:
    assert memory_headroom(fake_proc(tmp_path, "0::/\n"), tmp_path / "none") is None


def test_the_host_pool_counts_against_what_the_limits_leave(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(limits, "memory_headroom", lambda: 8 << 30)
    assert HostPool().capacity == min(physical_memory(), 7 << 30)  # an eighth kept back
    monkeypatch.setattr(limits, "memory_headroom", lambda: None)
    assert HostPool().capacity == physical_memory()


def test_under_rlimit_as_the_host_pool_refuses_what_the_process_cannot_get() -> None:
    """Its capacity was the machine's RAM whatever ulimit -v said."""
    code = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from zyx.errors import BackendError
from zyx.host.pool import HostPool
pool = HostPool()
assert pool.capacity < 3 << 30, pool.capacity
try:
    pool.allocate(pool.capacity + 1)
except BackendError as error:
    print(error.status.value)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "MemoryAllocation"


def test_a_thread_stack_is_rlimit_stack_or_glibcs_default() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    expected = limits.UNLIMITED_STACK if soft == resource.RLIM_INFINITY else soft
    assert thread_stack_bytes() == expected
