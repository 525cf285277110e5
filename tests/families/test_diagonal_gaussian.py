import numpy as np
import pytest
from scipy import stats

import mixfold
from mixfold.precision import resolve_precision
from mixfold import DataError, DataTypeError, MixtureDistribution, MixtureEstimator, ParameterError
from mixfold.families._encoders import VectorEncoder
from mixfold.families.diagonal_gaussian import (DiagonalGaussianAccumulator,
                                                DiagonalGaussianDistribution,
                                                DiagonalGaussianEstimator)
from tests.families.sklearn_em import clustered_rows, max_relative_difference, sklearn_trajectory


def reference_log_density(x, mu, s2):
    return stats.norm(mu, np.sqrt(s2)).logpdf(x).sum(axis=1)


def three_components():
    return MixtureDistribution([DiagonalGaussianDistribution([0.0, 1.0, -2.0], [1.0, 0.5, 2.0]),
                                DiagonalGaussianDistribution([3.0, -1.0, 0.0], [0.2, 1.5, 1.0]),
                                DiagonalGaussianDistribution([-2.0, 4.0, 1.0], [3.0, 0.8, 0.3])],
                               [0.2, 0.3, 0.5])


@pytest.mark.parametrize("shift", [0.0, 500.0])
def test_log_density_matches_scipy(shift, rng):
    mu, s2 = np.array([1.0, -2.0, 0.5]) + shift, np.array([0.5, 4.0, 1e-3])
    x = rng.normal(mu, 3 * np.sqrt(s2), size=(200, 3))
    d = DiagonalGaussianDistribution(mu, s2)
    got = d.seq_log_density(d.encoder().encode(x))
    np.testing.assert_allclose(got, reference_log_density(x, mu, s2), rtol=1e-12)
    assert d.log_density(x[0].tolist()) == pytest.approx(reference_log_density(x[:1], mu, s2)[0],
                                                         rel=1e-12)


def test_float32_band_is_close_to_float64(rng):
    m = three_components()
    enc = m.encoder().encode(rng.normal(0, 2, size=(1000, 3)))
    c = m.components[1]
    np.testing.assert_allclose(c.seq_log_density(
        enc, resolve_precision("float32")), c.seq_log_density(enc),
                               rtol=1e-5)
    np.testing.assert_allclose(m.component_log_densities(enc, resolve_precision("float32")),
                               m.component_log_densities(enc), rtol=1e-5)
    assert DiagonalGaussianDistribution.stack_log_density(m.components, enc,
                                                          "float32").dtype == np.float32


def test_mle_recovers_parameters():
    truth = DiagonalGaussianDistribution([2.5, -1.0, 0.0, 10.0], [4.0, 0.25, 1.0, 9.0])
    x = truth.sampler(3).sample(20_000)
    assert x.shape == (20_000, 4)
    d = mixfold.optimize(x, DiagonalGaussianEstimator(reg_covar=0.0), progress=False)
    assert d.dim == 4
    assert (np.abs(d.mu - truth.mu) < 4 * np.sqrt(truth.sigma2 / 20_000)).all()  # 4 s.e.
    np.testing.assert_allclose(d.sigma2, truth.sigma2, rtol=4 * np.sqrt(2 / 20_000))
    np.testing.assert_allclose(d.mu, x.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(d.sigma2, x.var(axis=0), rtol=1e-9)


def test_dim_is_learnt_at_encode_time_or_checked():
    x = np.arange(12.0).reshape(6, 2) ** 1.5
    est = DiagonalGaussianEstimator()
    assert repr(est.encoder()) == "VectorEncoder(None)"
    assert est.encoder().fit(x) == VectorEncoder(2)
    assert est.bind(VectorEncoder(2)).dim == 2
    assert mixfold.optimize(x.tolist(), est, progress=False).dim == 2
    assert mixfold.optimize(x, DiagonalGaussianEstimator(dim=2), progress=False).dim == 2
    with pytest.raises(DataTypeError, match="length 3"):
        mixfold.optimize(x, DiagonalGaussianEstimator(dim=3), progress=False)
    init = DiagonalGaussianDistribution([0.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="dim=3"):
        mixfold.optimize(x, DiagonalGaussianEstimator(dim=3), init=init, progress=False)
    assert mixfold.optimize(x, est, init=init, progress=False).dim == 2
    with pytest.raises(ValueError, match="dim=3"):
        DiagonalGaussianEstimator(dim=3).bind(VectorEncoder(2))
    with pytest.raises(ValueError, match="no dim"):
        DiagonalGaussianEstimator().accumulator_factory().make()
    with pytest.raises(ValueError):
        DiagonalGaussianEstimator(dim=0)


def test_weights_equal_repeated_rows(rng):
    x = rng.normal(size=(50, 3))
    w = rng.integers(0, 4, size=50)
    a = mixfold.optimize(x, DiagonalGaussianEstimator(), weights=w, progress=False)
    b = mixfold.optimize(np.repeat(x, w, axis=0), DiagonalGaussianEstimator(), progress=False)
    np.testing.assert_allclose(a.mu, b.mu, rtol=1e-12)
    np.testing.assert_allclose(a.sigma2, b.sigma2, rtol=1e-12)


def test_variance_floor_and_default_without_weight():
    x = np.tile([1.0, 2.0], (10, 1))
    est = DiagonalGaussianEstimator(reg_covar=0.0, min_variance=1e-8)
    d = mixfold.optimize(x, est, progress=False)
    assert d.mu.tolist() == [1.0, 2.0] and d.sigma2.tolist() == [1e-8, 1e-8]
    empty = DiagonalGaussianEstimator(dim=2).estimate(0.0, DiagonalGaussianAccumulator(2).value())
    assert empty == DiagonalGaussianDistribution([0.0, 0.0], [1.0, 1.0])


@pytest.mark.parametrize("bad,row,path", [
    ([[1.0, 2.0], [np.nan, 0.0]], 1, (0,)),
    ([[1.0, 2.0], [0.0, 1.0], [0.0, np.inf]], 2, (1,)),
    (np.array([[1.0, 2.0], [3.0, -np.inf]]), 1, (1,)),
    ([[1.0, 2.0], [1.0, "x"]], 1, (1,)),
])
def test_bad_values_are_rejected_with_row_and_column(bad, row, path):
    with pytest.raises(DataError) as err:
        mixfold.optimize(bad, DiagonalGaussianEstimator(), progress=False)
    assert err.value.row == row and err.value.path == path


@pytest.mark.parametrize("bad,row", [([[1.0, 2.0], [1.0, 2.0, 3.0]], 1),
                                     ([[1.0, 2.0], [1.0]], 1),
                                     ([[1.0, 2.0], [3.0, 4.0], 5.0], 2),
                                     ([1.0, [1.0, 2.0]], 0)])
def test_ragged_or_wrong_length_rows_are_type_errors_with_the_row(bad, row):
    with pytest.raises(DataTypeError) as err:
        mixfold.optimize(bad, DiagonalGaussianEstimator(), progress=False)
    assert err.value.row == row


def test_wrong_length_against_a_fixed_dim():
    with pytest.raises(DataTypeError) as err:
        DiagonalGaussianEstimator(dim=3).encoder().encode([[1.0, 2.0, 3.0], [1.0, 2.0]])
    assert err.value.row == 1
    with pytest.raises(DataTypeError):
        DiagonalGaussianEstimator(dim=3).encoder().encode(np.zeros((4, 2)))


def test_parameters_are_validated():
    for mu, s2 in [([0.0, 1.0], [1.0, -1.0]), ([0.0, np.nan], [1.0, 1.0]), ([0.0], [1.0, 1.0]),
                   ([], []), ([[0.0]], [[1.0]]), (["a"], [1.0]), ([0.0], [np.inf])]:
        with pytest.raises(ParameterError):
            DiagonalGaussianDistribution(mu, s2)


def test_dict_round_trip_is_exact():
    d = DiagonalGaussianDistribution([0.1 + 0.2, -1 / 7], [1 / 3, 2.0 ** -40])
    back = mixfold.Distribution.from_dict(d.to_dict())
    assert back == d
    np.testing.assert_array_equal(back.mu, d.mu)
    np.testing.assert_array_equal(back.sigma2, d.sigma2)
    m = three_components()
    assert mixfold.Distribution.from_dict(m.to_dict()) == m


def test_sample_moments():
    d = DiagonalGaussianDistribution([1.0, -3.0], [0.5, 2.0])
    x = d.sampler(5).sample(20_000)
    np.testing.assert_allclose(x.mean(axis=0), d.mu, atol=0.05)
    np.testing.assert_allclose(x.var(axis=0), d.sigma2, rtol=0.05)
    assert d.sampler(5).sample().shape == (2,)


def test_payload_round_trip_and_combine_of_halves(rng):
    x = rng.normal(size=(101, 3))
    w = rng.uniform(size=101)
    enc = DiagonalGaussianEstimator(dim=3).encoder().encode(x)
    model = DiagonalGaussianDistribution(np.zeros(3), np.ones(3))
    whole = DiagonalGaussianAccumulator(3)
    whole.seq_update(enc, w, model)
    a, b = DiagonalGaussianAccumulator(3), DiagonalGaussianAccumulator(3)
    a.seq_update(enc.rows(0, 30), w[:30], model)
    b.seq_update(enc.rows(30, 101), w[30:], model)
    np.testing.assert_allclose(a.combine(b).to_array(), whole.to_array(), rtol=1e-13)
    assert whole.payload_size() == 1 + 3 * 3  # weight, sums about c, sum w c
    copy = DiagonalGaussianAccumulator(3).from_array(whole.to_array())
    np.testing.assert_array_equal(copy.to_array(), whole.to_array())
    # about the model's mean, 0: the raw sums
    np.testing.assert_allclose(whole.to_array(),
                               np.concatenate([[w.sum()], w @ x, w @ x**2, np.zeros(3)]))


def test_stacked_scoring_equals_per_component_scoring(rng):
    m = three_components()
    assert m.units.stack is DiagonalGaussianDistribution
    for shift in (0.0, 50.0):
        enc = m.encoder().encode(rng.normal(0, 3, size=(400, 3)) + shift)
        per_component = np.stack([np.log(w) + c.seq_log_density(enc)
                                  for w, c in zip(m.weights, m.components)], axis=1)
        np.testing.assert_allclose(m.component_log_densities(enc), per_component, rtol=1e-12)


def test_stacked_update_equals_per_component_update(rng):
    m = three_components()
    enc = m.encoder().encode(rng.normal(0, 3, size=(400, 3)))
    resp = m.seq_posterior(enc) * rng.uniform(size=(400, 1))
    stacked = [DiagonalGaussianAccumulator(3) for _ in range(3)]
    for acc, point in zip(stacked, DiagonalGaussianAccumulator.stack_reference(m.components)):
        acc.set_reference(point)  # a stacked update sums about the point the stack shares
    DiagonalGaussianAccumulator.stack_update(stacked, enc, resp)
    for k, acc in enumerate(stacked):
        ref = DiagonalGaussianAccumulator(3)
        ref.seq_update(enc, np.ascontiguousarray(resp[:, k]), m.components[k])
        ref.align_references(acc)  # (summed about the component's own mean)
        np.testing.assert_allclose(acc.to_array(), ref.to_array(), rtol=1e-12, atol=1e-9)
    mix = MixtureEstimator([DiagonalGaussianEstimator(dim=3)] * 3).accumulator_factory().make()
    assert mix.units.stack_update is not None


def test_em_trajectory_and_parameters_match_sklearn_diag():
    x = clustered_rows()
    rng = np.random.default_rng(7)
    weights = np.array([0.2, 0.3, 0.5])
    means = x[rng.choice(len(x), 3, replace=False)]
    variances = x.var(axis=0) * rng.uniform(0.5, 1.5, size=(3, 4))
    init = MixtureDistribution([DiagonalGaussianDistribution(m, v)
                                for m, v in zip(means, variances)], weights)
    iterations = 15
    ref, gm = sklearn_trajectory(x, "diag", weights, means, 1.0 / variances, iterations)
    fit = mixfold.fit(x, MixtureEstimator([DiagonalGaussianEstimator()] * 3), init=init,
                      max_iter=iterations, tol=0.0, progress=False)
    ll = np.array(fit.log_likelihood)
    assert len(ll) == iterations and ll[-1] - ll[0] > 0.5  # EM moved a long way
    assert ll[0] == pytest.approx(init.seq_log_density(init.encoder().encode(x)).mean(),
                                  rel=1e-13)
    np.testing.assert_allclose(ll, ref, rtol=1e-8)
    model = fit.model
    assert max_relative_difference(model.weights, gm.weights_) < 1e-8
    assert max_relative_difference([c.mu for c in model.components], gm.means_) < 1e-8
    assert max_relative_difference([c.sigma2 for c in model.components], gm.covariances_) < 1e-8


def test_seeded_mixture_fit_recovers_separated_clusters():
    truth = MixtureDistribution([DiagonalGaussianDistribution([-6.0, 0.0], [1.0, 0.5]),
                                 DiagonalGaussianDistribution([0.0, 6.0], [0.3, 2.0]),
                                 DiagonalGaussianDistribution([6.0, -3.0], [2.0, 1.0])],
                                [0.3, 0.3, 0.4])
    x = truth.sampler(0).sample(20_000)
    fit = mixfold.optimize(x, MixtureEstimator([DiagonalGaussianEstimator()] * 3), seed=1,
                           progress=False)
    order = np.argsort([c.mu[0] for c in fit.components])
    np.testing.assert_allclose(fit.weights[order], truth.weights, atol=0.015)
    for i, c in zip(order, truth.components):
        np.testing.assert_allclose(fit.components[i].mu, c.mu, atol=0.05)
        np.testing.assert_allclose(fit.components[i].sigma2, c.sigma2, rtol=0.06)
