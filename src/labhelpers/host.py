"""The host CPU that the CPU baselines run on: its model, the CPUs this process may use, Numba's threads.

Every "times faster than the CPU" of the book is a ratio to a CPU measurement, so each CPU row says which
CPU it ran on and with how many threads: :func:`host_cpu` gathers that once, on any machine (no GPU needed).
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

import numba


@dataclass(frozen=True)
class HostCPU:
    """What a CPU measurement ran on.

    ``logical_cpus``: what the operating system reports; ``usable_cpus``: the CPUs this process may run on
    (its affinity mask); ``cpu_quota``: the CPUs' worth of time a cgroup allows (``None``: no limit);
    ``numba_threads``: the threads a Numba ``parallel=True`` loop uses; ``threading_layer``: Numba's
    threading layer (``omp``, ``tbb`` or ``workqueue``; ``not started`` before the first parallel call).
    """

    model: str
    logical_cpus: int
    usable_cpus: int
    cpu_quota: float | None
    numba_threads: int
    threading_layer: str

    def describe(self) -> str:
        """One line, e.g. ``AMD EPYC 9654: Numba 16 threads (omp), 16 of 16 CPUs usable``."""
        quota = f", cgroup quota {self.cpu_quota:g} CPUs" if self.cpu_quota is not None else ""
        return (f"{self.model}: Numba {self.numba_threads} threads ({self.threading_layer}), "
                f"{self.usable_cpus} of {self.logical_cpus} CPUs usable{quota}")

    def as_meta(self) -> dict:
        """The fields as a dict, for a reference table's ``meta``."""
        return {"cpu_model": self.model, "cpu_logical": self.logical_cpus, "cpu_usable": self.usable_cpus,
                "cpu_quota": self.cpu_quota, "numba_threads": self.numba_threads,
                "numba_threading_layer": self.threading_layer}


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (or what :mod:`platform` says elsewhere)."""
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return " ".join(name.split())


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask; ``os.cpu_count()`` where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def cpu_quota(root: str | Path = "/sys/fs/cgroup") -> float | None:
    """The CPUs' worth of time this process's cgroup (v2: ``cpu.max``; v1: ``cpu.cfs_quota_us``) allows.

    ``None`` when there is no limit or it cannot be read. A quota below the thread count makes a parallel
    loop wait for throttled threads: the measurement then says more about the quota than about the CPU.
    """
    root = Path(root)
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota <= 0 else quota / period
    except (OSError, ValueError):
        return None


def threading_layer() -> str:
    """Numba's threading layer once a parallel function has run, ``not started`` before."""
    try:
        return numba.threading_layer()
    except ValueError:  # no parallel function has run yet
        return "not started"


def host_cpu() -> HostCPU:
    """The host CPU as the CPU baselines see it (see :class:`HostCPU`)."""
    return HostCPU(model=cpu_model(), logical_cpus=os.cpu_count() or 1, usable_cpus=usable_cpus(),
                   cpu_quota=cpu_quota(), numba_threads=numba.get_num_threads(), threading_layer=threading_layer())


__all__ = ["HostCPU", "cpu_model", "cpu_quota", "host_cpu", "threading_layer", "usable_cpus"]
