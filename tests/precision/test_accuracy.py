"""Each band's error of a mixture's sufficient statistics, measured against double-double."""

import math
from fractions import Fraction

import numpy as np
import pytest

import mixfold
from mixfold import (DiagonalGaussianDistribution, GaussianDistribution, MixtureDistribution,
                     MultivariateGaussianDistribution)
from mixfold.compute.accuracy import estep_op_count, fold_statistics, statistics_relative_error
from mixfold.precision import BANDS, statistics_error_bound

MODELS = {
    "gaussian": MixtureDistribution([GaussianDistribution(-2, 1), GaussianDistribution(0.5, 0.5),
                                     GaussianDistribution(3, 2)], [0.3, 0.3, 0.4]),
    "diagonal": MixtureDistribution([DiagonalGaussianDistribution([-2, 1], [1, 2]),
                                     DiagonalGaussianDistribution([2, 0], [0.5, 1])], [0.4, 0.6]),
    "full": MixtureDistribution(
        [MultivariateGaussianDistribution([-2, 1], [[1, 0.3], [0.3, 2]]),
         MultivariateGaussianDistribution([2, 0], [[0.5, 0.1], [0.1, 1]])], [0.4, 0.6]),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_error_grows_from_dd_to_float32_and_the_screened_bands_keep_float32s(name):
    """dd, float64 and float32 in order; the bands below float32 screen in the band and rescore
    in float64 from float32 features, so their error is float32's (fp8, which no CPU unit runs,
    is the emulator's: every step in the band)."""
    model = MODELS[name]
    enc = model.encoder().encode(model.sampler(0).sample(3000))
    ops = estep_op_count(model)
    errors = {b: statistics_relative_error(model, enc, b, reference="dd") for b in BANDS}
    assert errors["dd"] == 0.0 < errors["float64"] < errors["float32"] < 1e-6, errors
    for band in ("bfloat16", "float16"):
        assert 0 < errors[band] <= statistics_error_bound("float32", ops, enc.n_rows), errors
    for band, err in errors.items():
        assert err <= statistics_error_bound(band, ops, enc.n_rows), (band, err)
    assert errors["fp8"] > 1e-4  # the emulator really ran


def test_dd_statistics_round_the_exact_sums():
    x = GaussianDistribution(1e4, 1.0).sampler(3).sample(2000)  # large mean: x^2 cancels
    g = GaussianDistribution(1e4, 1.0)
    stats = np.concatenate(fold_statistics(g, g.encoder().encode(x), "dd", chunk_rows=300))
    c = 1e4  # the statistics are summed about the model's mean
    exact = [len(x), sum(Fraction(v) - Fraction(c) for v in x),
             sum((Fraction(v) - Fraction(c)) ** 2 for v in x), len(x) * Fraction(c)]
    assert stats.tolist() == [float(e) for e in exact]
    # the data is hard: left-to-right float64 sums miss the exact ones (how far a float64 fold
    # misses depends on the BLAS's summation order, so it is only held to its bound)
    s1 = s2 = 0.0
    for v in x.tolist():
        d = v - c
        s1, s2 = s1 + d, s2 + d * d
    assert s1 != float(exact[1]) or s2 != float(exact[2])
    naive = np.concatenate(fold_statistics(g, g.encoder().encode(x), "float64"))
    assert abs(naive[2] - float(exact[2])) <= len(x) * 2.0 ** -53 * float(exact[2])


def test_dd_mixture_statistics_do_not_depend_on_chunking():
    m = MODELS["diagonal"]
    enc = m.encoder().encode(m.sampler(5).sample(2000))
    ref = fold_statistics(m, enc, "dd", chunk_rows=65536)
    for chunk in (999, 250, 77):
        for a, b in zip(fold_statistics(m, enc, "dd", chunk_rows=chunk), ref):
            np.testing.assert_array_equal(a, b)


def test_every_band_fits_a_gaussian_mixture():
    model = MODELS["gaussian"]
    x = model.sampler(1).sample(3000)
    est = mixfold.MixtureEstimator([mixfold.GaussianEstimator()] * 3)
    reference = mixfold.optimize(x, est, seed=0, max_iter=60, tol=0, progress=False)
    for band in BANDS:
        # tol=0: stop when the band's log-likelihood no longer changes at all (its resolution)
        fit = mixfold.optimize(x, est, seed=0, max_iter=60, tol=0, precision=band,
                               progress=False)
        assert fit.fit_result.precision == band
        mus = sorted(c.mu for c in fit.components)
        want = sorted(c.mu for c in reference.components)
        tol = {"fp8": 0.5, "bfloat16": 0.1, "float16": 0.01}.get(band, 1e-5)
        np.testing.assert_allclose(mus, want, atol=tol)
        assert math.isfinite(fit.fit_result.final_log_likelihood)
