"""The processes a test started, read from /proc: a process's tree, and the command lines that hold a secret."""

from __future__ import annotations

from pathlib import Path

from airflow_stream_provider.processes import descendants


def tree(root: int) -> list[int]:
    """``root`` and every process descending from it, ``root`` first."""
    return descendants(root)


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def holding(pids: list[int], *secrets: str) -> list[str]:
    """The command lines of ``pids`` that contain any of ``secrets``, as ``pid: command line``
    (what ``ps`` shows every local user)."""
    out = []
    for pid in pids:
        line = command_line(pid)
        if any(secret and secret in line for secret in secrets):
            out.append(f"{pid}: {line[:300]}")
    return out
