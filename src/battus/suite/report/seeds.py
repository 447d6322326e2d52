"""Numbers averaged over seeds: the mean, its sample sd and 95% Student-t interval.

An experiment repeated over seeds (``seeds:`` in its config) gives one score file per seed of a
simulated dataset; :func:`merge_seeds` makes one record of them whose numbers are
:class:`SeedStat` floats: the mean over seeds, keeping the per-seed values. Means over datasets
(:func:`seed_mean`) are taken seed by seed, so their sd is over seeds too. Ranking and bold use
the mean; a single seed prints and writes as a plain number.
"""

from __future__ import annotations

import math

import numpy as np

# Student's t 0.975 quantile for 1..30 degrees of freedom (scipy.stats.t.ppf, six decimals)
_T975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
         2.200985, 2.178813, 2.160369, 2.144787, 2.13145, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
         2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.04523, 2.042272)


def t975(dof: int) -> float:
    """Student's t 0.975 quantile: a table to 30 degrees of freedom, then the Cornish-Fisher
    expansion about the normal quantile (Abramowitz & Stegun 26.7.5; error < 1e-6 beyond 30)."""
    if dof < 1:
        raise ValueError(f"t quantile needs at least 1 degree of freedom, got {dof}")
    if dof <= len(_T975):
        return _T975[dof - 1]
    z = 1.959963984540054
    terms = ((z**3 + z) / 4, (5 * z**5 + 16 * z**3 + 3 * z) / 96,
             (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
             (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160)
    return z + sum(g / dof ** (k + 1) for k, g in enumerate(terms))


class SeedStat(float):
    """A mean over seeds (its value as a float) that keeps the per-seed values it averages."""

    values: np.ndarray

    def __new__(cls, values):
        values = np.asarray(values, dtype=float)
        if values.ndim != 1 or len(values) < 1:
            raise ValueError("SeedStat needs a non-empty list of per-seed values")
        obj = super().__new__(cls, float(values.mean()))
        obj.values = values
        return obj

    def __reduce__(self):
        return SeedStat, (self.values.tolist(),)

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def sd(self) -> float:
        """Sample standard deviation over seeds (ddof 1); NaN for one seed."""
        return float(self.values.std(ddof=1)) if self.n > 1 else math.nan

    def ci95(self) -> tuple[float, float]:
        """The 95% Student-t interval of the mean over seeds (NaN for one seed)."""
        if self.n < 2:
            return math.nan, math.nan
        half = t975(self.n - 1) * self.sd / math.sqrt(self.n)
        return float(self) - half, float(self) + half


def seeded(value) -> bool:
    """A number averaged over two or more seeds."""
    return isinstance(value, SeedStat) and value.n > 1


def seed_sd(value) -> float:
    """The sd over seeds of a number (0 where it is not averaged over seeds: for error bars)."""
    return value.sd if seeded(value) else 0.0


def scaled(value, factor: float) -> float:
    """``factor * value``, keeping the seeds of a mean over seeds (a unit change)."""
    return SeedStat(factor * value.values) if seeded(value) else factor * value


def seed_mean(values, reduce=np.mean) -> float:
    """The mean (or ``reduce``) over datasets of numbers that may be means over seeds.

    Seed by seed where any is (datasets of one experiment share its seed list): the result is a
    SeedStat whose sd is over seeds of the mean over datasets. A number of one dataset without
    seeds (an imported history) counts the same in every seed. Plain floats give a plain float;
    numbers over different seed counts give the plain reduce of their means.
    """
    values = list(values)
    counts = {v.n for v in values if seeded(v)}
    if len(counts) != 1:
        return float(reduce(np.array([float(v) for v in values])))
    n = counts.pop()
    per_seed = np.array([v.values if seeded(v) else np.full(n, float(v)) for v in values])
    return SeedStat(reduce(per_seed, axis=0))


def seed_diff(a, b) -> float:
    """``a - b`` seed by seed where both are means over the same number of seeds (a number without
    seeds counts the same in every seed), else the plain difference of the means."""
    counts = {v.n for v in (a, b) if seeded(v)}
    if len(counts) != 1:
        return float(a) - float(b)
    n = counts.pop()
    per_seed = [v.values if seeded(v) else np.full(n, float(v)) for v in (a, b)]
    return SeedStat(per_seed[0] - per_seed[1])


def merge_seeds(records: list):
    """One score record from the records of several seeds: every number that differs between
    seeds (and every float) becomes a SeedStat, equal integers stay, anything else (strings,
    lists such as observed times or reliability bins, None) is the first seed's."""
    first = records[0]
    if isinstance(first, dict):
        return {k: merge_seeds([r[k] for r in records]) for k in first
                if all(isinstance(r, dict) and k in r for r in records)}
    numeric = all(isinstance(r, (int, float)) and not isinstance(r, bool) for r in records)
    if not numeric or (all(isinstance(r, int) for r in records) and len(set(records)) == 1):
        return first
    return SeedStat([float(r) for r in records])
