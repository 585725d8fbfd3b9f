"""Unit conversions and formatting shared by every layer."""

from __future__ import annotations

MIB = 1024 * 1024
GIB = 1024 * MIB


def bytes_to_mib(n_bytes: float) -> float:
    """Bytes to MiB (float)."""
    return n_bytes / MIB


def mib_to_bytes(mib: float) -> int:
    """MiB to bytes (rounded down)."""
    return int(mib * MIB)


def format_bytes(n_bytes: float | None) -> str:
    """Human-readable size with binary units ('1.5 GiB'); '—' for unknown."""
    if n_bytes is None:
        return "—"
    value = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_mib(mib: float | None) -> str:
    """MiB figure as shown in plans ('1,234 MiB'); '—' for unknown."""
    return "—" if mib is None else f"{mib:,.0f} MiB"


def format_count(n: float | None) -> str:
    """Large counts with SI suffix ('268M', '7.6B'); '—' for unknown."""
    if n is None:
        return "—"
    for div, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= div:
            return f"{n / div:.1f}{suffix}".replace(".0" + suffix, suffix)
    return f"{n:.0f}"
