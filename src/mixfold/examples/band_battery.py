"""Does each precision band keep its promise? Fits of data sets that are hard for a band, each
run in the band and in float64 from the same start, judged on what the user gets.

For every (data set, band): the relative distance of the final mean log-likelihoods (both
models scored in float64) against the band's promise
(:data:`~mixfold.precision.bands.FIT_DISTANCE`), the mean per-row distance of the two fitted
densities (nats, relative to the log-likelihood) against
:data:`~mixfold.precision.bands.PARAMETER_DISTANCE`, the largest fall of the true (float64)
log-likelihood from one iterate to the next, and the largest distance between what the fit
reported for an iterate and its float64 evaluation (the promise: 1e-6 relative)::

    python -m mixfold.examples.band_battery                  # every data set, 200,000 rows
    python -m mixfold.examples.band_battery --rows 20000 --sets separated,far

>>> row = check_band("separated", "bfloat16", n_rows=2000, max_iter=3)
>>> row["fit_distance"] < 1e-5 and row["reported_distance"] < 1e-6
True
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import mixfold
from mixfold.compute.accuracy import density_distance
from mixfold.precision import FIT_DISTANCE, PARAMETER_DISTANCE

__all__ = ["DATA_SETS", "check_band", "battery", "REPORTED_DISTANCE"]

#: How close what a fit reports for an iterate must be to that iterate's float64 evaluation.
REPORTED_DISTANCE = 1e-6


def _clusters(rng: np.random.Generator, n: int, k: int, d: int, spread: float,
              scales: tuple[float, float]) -> np.ndarray:
    """n rows of k Gaussian clusters in d dimensions: centres ``spread`` apart on average,
    per-coordinate scales drawn in ``scales``."""
    centres = rng.normal(scale=spread, size=(k, d))
    sigma = rng.uniform(*scales, size=(k, d))
    label = rng.integers(k, size=n)
    return centres[label] + rng.normal(size=(n, d)) * sigma[label]


def _diagonal(k: int) -> mixfold.MixtureEstimator:
    return mixfold.MixtureEstimator([mixfold.DiagonalGaussianEstimator()] * k)


def separated(rng: np.random.Generator, n: int) -> tuple[Any, Any]:
    """16 well-separated clusters in 10-D (the issue's P1-like case): scales 0.5-2."""
    return _clusters(rng, n, 16, 10, 5.0, (0.5, 2.0)), _diagonal(16)


def overlapping(rng: np.random.Generator, n: int) -> tuple[Any, Any]:
    """8 overlapping clusters in 5-D: every row has several components to share."""
    return _clusters(rng, n, 8, 5, 1.0, (0.8, 1.5)), _diagonal(8)


def far(rng: np.random.Generator, n: int) -> tuple[Any, Any]:
    """The separated clusters moved 10^6 times their spread from the origin."""
    x, est = separated(rng, n)
    return x + 5e6, est


def wide(rng: np.random.Generator, n: int) -> tuple[Any, Any]:
    """4 clusters in 128-D (more features than the AMX tiles take)."""
    return _clusters(rng, n, 4, 128, 0.5, (0.5, 2.0)), _diagonal(4)


def many(rng: np.random.Generator, n: int) -> tuple[Any, Any]:
    """256 components in 4-D."""
    return _clusters(rng, n, 256, 4, 20.0, (0.5, 2.0)), _diagonal(256)


def full(rng: np.random.Generator, n: int) -> tuple[Any, Any]:
    """4 clusters with correlated coordinates in 3-D (full covariance), 100 from the origin."""
    k, d = 4, 3
    centres = rng.normal(scale=5.0, size=(k, d)) + 100.0
    mixing = rng.normal(size=(k, d, d))
    label = rng.integers(k, size=n)
    x = centres[label] + np.einsum("nij,nj->ni", mixing[label], rng.normal(size=(n, d)))
    return x, mixfold.MixtureEstimator([mixfold.MultivariateGaussianEstimator()] * k)


def records(rng: np.random.Generator, n: int) -> tuple[Any, Any]:
    """Records of a Gaussian (far from the origin), a categorical and a Poisson of large counts
    (4 segments)."""
    seg = rng.integers(4, size=n)
    height = rng.normal(1000.0 + 3.0 * seg, 0.5 + 0.3 * seg)
    plan = np.array(["a", "b", "c", "d", "e"])[(seg + rng.integers(2, size=n)) % 5]
    visits = rng.poisson(500.0 + 40.0 * seg)
    rows = list(zip(height.tolist(), plan.tolist(), visits.tolist()))
    field = mixfold.CompositeEstimator((mixfold.GaussianEstimator(),
                                        mixfold.CategoricalEstimator(),
                                        mixfold.PoissonEstimator()))
    return rows, mixfold.MixtureEstimator([field] * 4)


#: The data sets, by name.
DATA_SETS: dict[str, Callable[[np.random.Generator, int], tuple[Any, Any]]] = {
    f.__name__: f for f in (separated, overlapping, far, wide, many, full, records)}


def check_band(name: str, band: str, n_rows: int = 20_000, max_iter: int = 10,
               seed: int = 0) -> dict[str, Any]:
    """Fit data set ``name`` in ``band`` and in float64 from the same start (``tol=0``); the
    measures of the module, with the band's promises and the seconds of both fits."""
    data, est = DATA_SETS[name](np.random.default_rng(seed), n_rows)
    iterates: list[Any] = []
    t = time.perf_counter()
    fit = mixfold.optimize(data, est, seed=seed, tol=0, max_iter=max_iter, precision=band,
                           progress=False, callbacks=[lambda info: iterates.append(info.model)])
    band_seconds = time.perf_counter() - t
    t = time.perf_counter()
    ref = mixfold.optimize(data, est, seed=seed, tol=0, max_iter=max_iter, progress=False)
    ref_seconds = time.perf_counter() - t
    enc = ref.encoder().encode(data)
    true = [float(np.mean(m.seq_log_density(enc))) for m in iterates]
    reported = fit.fit_result.log_likelihood[1:len(true) + 1]  # what iterate i's E-step said
    want = float(np.mean(ref.seq_log_density(enc)))
    got = float(np.mean(fit.seq_log_density(enc)))
    return {"set": name, "band": band, "rows": n_rows, "iterations": len(true),
            "fit_distance": abs(got - want) / abs(want), "promise": FIT_DISTANCE[band],
            "density_distance": density_distance(fit, ref, enc) / abs(want),
            "density_promise": PARAMETER_DISTANCE[band],
            "largest_fall": max([0.0] + [(a - b) / abs(a) for a, b in zip(true, true[1:])]),
            "reported_distance": max([0.0] + [abs(r - v) / abs(v)
                                               for r, v in zip(reported, true)]),
            "promotions": list(fit.fit_result.promotions),
            "seconds": band_seconds, "float64_seconds": ref_seconds}


def battery(names: list[str], bands: list[str], n_rows: int, max_iter: int) -> list[dict]:
    """:func:`check_band` for every data set and band."""
    return [check_band(n, b, n_rows, max_iter) for n in names for b in bands]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--sets", default=",".join(DATA_SETS))
    parser.add_argument("--bands", default="bfloat16,float16,float32")
    args = parser.parse_args()
    print(f"{'set':<12} {'band':<9} {'fit dist':>9} {'promise':>8} {'dens dist':>9} "
          f"{'fall':>8} {'reported':>9} {'s':>6} {'f64 s':>6} promotions")
    for r in battery(args.sets.split(","), args.bands.split(","), args.rows, args.iterations):
        print(f"{r['set']:<12} {r['band']:<9} {r['fit_distance']:>9.1e} {r['promise']:>8.0e} "
              f"{r['density_distance']:>9.1e} {r['largest_fall']:>8.1e} "
              f"{r['reported_distance']:>9.1e} {r['seconds']:>6.2f} {r['float64_seconds']:>6.2f} "
              f"{'; '.join(r['promotions']) or '-'}", flush=True)


if __name__ == "__main__":
    main()
