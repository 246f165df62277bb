"""Histograms of durations that add up: what the rollup keeps instead of every value.

A duration (seconds) is kept as the count of its *bucket*: the smallest number with two
significant digits at or above it (0.0123 s → 0.013 s, 47.2 s → 48 s). So a bucket is
at most 10 % wide, and any bound of two significant digits — all of Prometheus's
``le`` bounds in ``metrics.prometheus`` — splits the buckets exactly: a value is
``<= 0.25`` exactly when its bucket's upper bound is.

A bucket's id is an integer: ``(exponent + OFFSET) * 100 + mantissa`` with the upper
bound ``mantissa × 10^(exponent - 1)``, mantissa 10–99. Durations of a microsecond or
less share bucket 0 (upper bound 0).

Percentiles from a histogram follow PostgreSQL's ``percentile_cont`` (interpolation
between the two nearest ranks), each rank's value read as if its bucket's values were
spread evenly over it: off from the exact value by less than the bucket's width.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

OFFSET = 7  # exponent -6 (a microsecond's bucket) has id 1xx
FINEST = 1e-6
ROUNDING = 1e-9  # 0.05 / 0.001 is 50.000000000000004 in floating point


def bucket(seconds: float) -> int:
    """The id of the bucket ``seconds`` falls in."""
    if seconds <= FINEST:
        return 0
    exponent = math.floor(math.log10(seconds))
    mantissa = math.ceil(seconds / 10 ** (exponent - 1) - ROUNDING)
    if mantissa < 10:  # log10 rounded up past a power of ten
        exponent, mantissa = exponent - 1, math.ceil(seconds / 10 ** (exponent - 2) - ROUNDING)
    if mantissa >= 100:
        exponent, mantissa = exponent + 1, 10
    return (exponent + OFFSET) * 100 + mantissa


def upper(bucket_id: int) -> float:
    """The largest value of the bucket (inclusive)."""
    if bucket_id <= 0:
        return 0.0
    exponent, mantissa = divmod(bucket_id, 100)
    return mantissa * 10.0 ** (exponent - OFFSET - 1)


def lower(bucket_id: int) -> float:
    """The largest value of the bucket before it (exclusive)."""
    if bucket_id <= 0:
        return 0.0
    exponent, mantissa = divmod(bucket_id, 100)
    if mantissa == 10:
        return 99 * 10.0 ** (exponent - OFFSET - 2)
    return (mantissa - 1) * 10.0 ** (exponent - OFFSET - 1)


def quantile(counts: Mapping[int, int], fraction: float) -> float | None:
    """percentile_cont(``fraction``) of the values counted by bucket; None for none."""
    ordered = sorted((b, n) for b, n in counts.items() if n > 0)
    total = sum(n for _, n in ordered)
    if not total:
        return None
    position = fraction * (total - 1)
    low, high = math.floor(position), math.ceil(position)
    at_low, at_high = _ranked(ordered, low), _ranked(ordered, high)
    return at_low + (at_high - at_low) * (position - low)


def _ranked(ordered: list[tuple[int, int]], rank: int) -> float:
    """The value of the ``rank``-th smallest (from 0), spread evenly over its bucket."""
    seen = 0
    for bucket_id, n in ordered:
        if rank < seen + n:
            low, high = lower(bucket_id), upper(bucket_id)
            return low + (high - low) * (rank - seen + 0.5) / n
        seen += n
    raise ValueError(f"rank {rank} is past the {seen} values counted")


def cumulative(counts: Mapping[int, int], bounds: Iterable[float]) -> list[int]:
    """How many values are at most each of ``bounds`` (each of two significant digits)."""
    return [sum(n for b, n in counts.items() if upper(b) <= bound * (1 + ROUNDING)) for bound in bounds]
