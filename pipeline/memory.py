"""The process's memory between phases: what a finished phase freed handed back to the
system, and the peak RSS a phase is measured by.

One process runs every stage, verify and the report; without release() each phase's peak
would start from the high-water mark of those before it (Arrow's pool and glibc's free
lists keep freed pages for reuse, which the next phase's allocations, often another
allocator's, never make: 150-250 MB at 3M items in dedup, 200 MB at 10M between the
report's sections).
"""

from __future__ import annotations

import ctypes
from typing import Any

import pyarrow as pa


def _malloc_trim() -> Any:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_MALLOC_TRIM = _malloc_trim()


def release() -> None:
    """Gives freed memory back to the system: Arrow's pool and glibc's free lists. No
    gc.collect: it costs 0.17 s a stage in a process holding torch, for no measured gain."""
    pa.default_memory_pool().release_unused()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def reset_peak_rss() -> None:
    """Starts the process's peak RSS (VmHWM) again from its current RSS (Linux; elsewhere a
    no-op), so a stage's peak is its own."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss_mib() -> float | None:
    """The process's peak RSS since the last reset_peak_rss, in MiB (None where unknown)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None
