import numpy as np
import pytest
from scipy import stats

import mixfold
from mixfold.precision import resolve_precision
from mixfold import DataError, DataTypeError, MixtureDistribution, MixtureEstimator, ParameterError
from mixfold.families._encoders import VectorEncoder
from mixfold.families.multivariate_gaussian import (MultivariateGaussianAccumulator,
                                                    MultivariateGaussianDistribution,
                                                    MultivariateGaussianEstimator)
from tests.families.sklearn_em import clustered_rows, max_relative_difference, sklearn_trajectory


def random_cov(rng, d, scale=1.0):
    a = rng.normal(size=(d, d))
    return scale * (a @ a.T / d + 0.2 * np.eye(d))


def three_components(rng, d=3):
    means = [np.zeros(d), np.full(d, 3.0), np.linspace(-2.0, 2.0, d)]
    comps = [MultivariateGaussianDistribution(m, random_cov(rng, d, s))
             for m, s in zip(means, (1.0, 0.5, 2.0))]
    return MixtureDistribution(comps, [0.2, 0.3, 0.5])


@pytest.mark.parametrize("d,shift", [(1, 0.0), (3, 0.0), (5, 200.0)])
def test_log_density_matches_scipy(d, shift, rng):
    mu, cov = rng.normal(size=d) + shift, random_cov(rng, d)
    x = rng.multivariate_normal(mu, 4 * cov, size=200)
    dist = MultivariateGaussianDistribution(mu, cov)
    got = dist.seq_log_density(dist.encoder().encode(x))
    ref = stats.multivariate_normal(mu, cov).logpdf(x).reshape(-1)
    np.testing.assert_allclose(got, ref, rtol=1e-11)
    assert dist.log_density(x[0].tolist()) == pytest.approx(ref[0], rel=1e-11)


def test_precision_cholesky_factor(rng):
    cov = random_cov(rng, 4)
    d = MultivariateGaussianDistribution(np.zeros(4), cov)
    u = d.precision_cholesky
    np.testing.assert_allclose(u @ u.T, np.linalg.inv(cov), rtol=1e-10, atol=1e-12)
    assert np.allclose(np.tril(u, -1), 0.0) and (np.diag(u) > 0).all()


def test_float32_band_is_close_to_float64(rng):
    m = three_components(rng)
    enc = m.encoder().encode(rng.normal(0, 2, size=(1000, 3)))
    c = m.components[2]
    np.testing.assert_allclose(c.seq_log_density(
        enc, resolve_precision("float32")), c.seq_log_density(enc),
                               rtol=1e-5)
    np.testing.assert_allclose(m.component_log_densities(enc, resolve_precision("float32")),
                               m.component_log_densities(enc), rtol=1e-5)
    assert MultivariateGaussianDistribution.stack_log_density(m.components, enc,
                                                              "float32").dtype == np.float32


def test_mle_recovers_parameters(rng):
    truth = MultivariateGaussianDistribution([2.5, -1.0, 0.0, 10.0], random_cov(rng, 4, 2.0))
    x = truth.sampler(3).sample(20_000)
    assert x.shape == (20_000, 4)
    d = mixfold.optimize(x, MultivariateGaussianEstimator(reg_covar=0.0), progress=False)
    assert d.dim == 4
    sd = np.sqrt(np.diag(truth.cov))
    assert (np.abs(d.mu - truth.mu) < 4 * sd / np.sqrt(20_000)).all()  # 4 s.e.
    assert (np.abs(d.cov - truth.cov) < 4 * np.outer(sd, sd) * np.sqrt(2 / 20_000)).all()
    np.testing.assert_allclose(d.mu, x.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(d.cov, np.cov(x.T, bias=True), rtol=1e-9)


def test_dim_is_learnt_at_encode_time_or_checked():
    x = np.random.default_rng(0).normal(size=(20, 3))
    est = MultivariateGaussianEstimator()
    assert est.encoder().fit(x.tolist()) == VectorEncoder(3)
    assert mixfold.optimize(x.tolist(), est, progress=False).dim == 3
    with pytest.raises(DataTypeError, match="length 2"):
        mixfold.optimize(x, MultivariateGaussianEstimator(dim=2), progress=False)
    with pytest.raises(ValueError, match="dim=2"):
        MultivariateGaussianEstimator(dim=2).bind(VectorEncoder(3))
    with pytest.raises(ValueError, match="no dim"):
        est.accumulator_factory().make()


def test_weights_equal_repeated_rows(rng):
    x = rng.normal(size=(50, 3))
    w = rng.integers(0, 4, size=50)
    a = mixfold.optimize(x, MultivariateGaussianEstimator(), weights=w, progress=False)
    b = mixfold.optimize(np.repeat(x, w, axis=0), MultivariateGaussianEstimator(), progress=False)
    np.testing.assert_allclose(a.mu, b.mu, rtol=1e-12)
    np.testing.assert_allclose(a.cov, b.cov, rtol=1e-11, atol=1e-14)


def test_reg_covar_on_the_diagonal_and_default_without_weight():
    x = np.tile([1.0, 2.0], (10, 1))
    d = mixfold.optimize(x, MultivariateGaussianEstimator(reg_covar=1e-4), progress=False)
    np.testing.assert_allclose(d.cov, 1e-4 * np.eye(2), atol=1e-15)
    est = MultivariateGaussianEstimator(dim=2)
    empty = est.estimate(0.0, MultivariateGaussianAccumulator(2).value())
    assert empty == MultivariateGaussianDistribution([0.0, 0.0], np.eye(2))
    with pytest.raises(mixfold.NumericalError):  # a singular covariance is not a model
        mixfold.optimize(x, MultivariateGaussianEstimator(reg_covar=0.0), progress=False)


@pytest.mark.parametrize("bad,row,path", [
    ([[1.0, 2.0], [np.nan, 0.0]], 1, (0,)),
    ([[1.0, 2.0], [0.0, 1.0], [0.0, np.inf]], 2, (1,)),
    ([[1.0, 2.0], ["x", 1.0]], 1, (0,)),
])
def test_bad_values_are_rejected_with_row_and_column(bad, row, path):
    with pytest.raises(DataError) as err:
        mixfold.optimize(bad, MultivariateGaussianEstimator(), progress=False)
    assert err.value.row == row and err.value.path == path


@pytest.mark.parametrize("bad,row", [([[1.0, 2.0], [1.0, 2.0, 3.0]], 1),
                                     ([[1.0, 2.0], [3.0, 4.0], [1.0]], 2)])
def test_ragged_rows_are_type_errors_with_the_row(bad, row):
    with pytest.raises(DataTypeError) as err:
        mixfold.optimize(bad, MultivariateGaussianEstimator(), progress=False)
    assert err.value.row == row


def vector_records(rng, n=120):
    v = np.concatenate([rng.normal(-2.0, 1.0, (n // 2, 3)), rng.normal(3.0, 0.5, (n // 2, 3))])
    return v, rng.normal(size=n)


def vector_record_fit(data):
    est = MixtureEstimator([mixfold.RecordEstimator(
        {"v": MultivariateGaussianEstimator(), "y": mixfold.GaussianEstimator()})] * 2)
    return mixfold.fit(data, est, seed=1, max_iter=5, tol=0.0, progress=False).model


@pytest.mark.parametrize("form", ["pandas", "arrow"])
def test_a_column_of_vectors_fits_as_the_rows_do(form, rng):
    # a DataFrame's column of arrays is an object array of rows (pandas, Arrow's list<double>)
    pd = pytest.importorskip("pandas")
    v, y = vector_records(rng)
    df = pd.DataFrame({"v": list(v), "y": y})
    data = df if form == "pandas" else pytest.importorskip("pyarrow").Table.from_pandas(df)
    expected = vector_record_fit([{"v": list(r), "y": float(t)} for r, t in zip(v, y)])
    assert vector_record_fit(data).to_dict() == expected.to_dict()


def test_a_ragged_column_of_vectors_names_its_row(rng):
    pd = pytest.importorskip("pandas")
    v, y = vector_records(rng)
    rows = list(v[:5]) + [v[5, :2]] + list(v[6:])
    with pytest.raises(DataTypeError) as err:
        vector_record_fit(pd.DataFrame({"v": rows, "y": y}))
    assert err.value.row == 5 and "length 3" in str(err.value)


def test_parameters_are_validated():
    bad = [([0.0, 0.0], [[1.0, 0.0], [0.0, -1.0]]),      # not positive definite
           ([0.0, 0.0], [[1.0, 2.0], [2.0, 1.0]]),       # indefinite
           ([0.0, 0.0], [[1.0, 0.5], [0.0, 1.0]]),       # not symmetric
           ([0.0, 0.0], [[1.0, 0.0, 0.0]] * 3),          # wrong shape
           ([0.0, np.nan], np.eye(2)), ([0.0, 0.0], [[1.0, np.inf], [np.inf, 1.0]]),
           ([], np.zeros((0, 0))), ([[0.0]], [[1.0]]), (["a", "b"], np.eye(2))]
    for mu, cov in bad:
        with pytest.raises(ParameterError):
            MultivariateGaussianDistribution(mu, cov)


def test_dict_round_trip_is_exact(rng):
    d = MultivariateGaussianDistribution([0.1 + 0.2, -1 / 7, 1e-300], random_cov(rng, 3) / 3)
    back = mixfold.Distribution.from_dict(d.to_dict())
    assert back == d
    np.testing.assert_array_equal(back.cov, d.cov)
    np.testing.assert_array_equal(back.precision_cholesky, d.precision_cholesky)
    m = three_components(rng)
    assert mixfold.Distribution.from_dict(m.to_dict()) == m


def test_sample_moments(rng):
    d = MultivariateGaussianDistribution([1.0, -3.0], [[0.5, 0.3], [0.3, 2.0]])
    x = d.sampler(5).sample(20_000)
    np.testing.assert_allclose(x.mean(axis=0), d.mu, atol=0.05)
    np.testing.assert_allclose(np.cov(x.T), d.cov, atol=0.05)
    assert d.sampler(5).sample().shape == (2,)


def test_payload_round_trip_and_combine_of_halves(rng):
    x = rng.normal(size=(101, 3))
    w = rng.uniform(size=101)
    enc = MultivariateGaussianEstimator(dim=3).encoder().encode(x)
    model = MultivariateGaussianDistribution(np.zeros(3), np.eye(3))
    whole = MultivariateGaussianAccumulator(3)
    whole.seq_update(enc, w, model)
    a, b = MultivariateGaussianAccumulator(3), MultivariateGaussianAccumulator(3)
    a.seq_update(enc.rows(0, 30), w[:30], model)
    b.seq_update(enc.rows(30, 101), w[30:], model)
    np.testing.assert_allclose(a.combine(b).to_array(), whole.to_array(), rtol=1e-13)
    assert whole.payload_size() == 1 + 3 + 9 + 3  # ... and sum w c
    copy = MultivariateGaussianAccumulator(3).from_array(whole.to_array())
    np.testing.assert_array_equal(copy.to_array(), whole.to_array())
    np.testing.assert_allclose(whole.sum_xx, np.einsum("i,ij,ik->jk", w, x, x), rtol=1e-13)


def test_stacked_scoring_equals_per_component_scoring(rng):
    m = three_components(rng)
    assert m.units.stack is MultivariateGaussianDistribution
    for shift in (0.0, 50.0):
        enc = m.encoder().encode(rng.normal(0, 3, size=(400, 3)) + shift)
        per_component = np.stack([np.log(w) + c.seq_log_density(enc)
                                  for w, c in zip(m.weights, m.components)], axis=1)
        np.testing.assert_allclose(m.component_log_densities(enc), per_component, rtol=1e-12)


def test_stacked_update_equals_per_component_update(rng):
    m = three_components(rng)
    enc = m.encoder().encode(rng.normal(0, 3, size=(400, 3)))
    resp = m.seq_posterior(enc) * rng.uniform(size=(400, 1))
    stacked = [MultivariateGaussianAccumulator(3) for _ in range(3)]
    for acc, point in zip(stacked, MultivariateGaussianAccumulator.stack_reference(m.components)):
        acc.set_reference(point)  # a stacked update sums about the point the stack shares
    MultivariateGaussianAccumulator.stack_update(stacked, enc, resp)
    for k, acc in enumerate(stacked):
        ref = MultivariateGaussianAccumulator(3)
        ref.seq_update(enc, np.ascontiguousarray(resp[:, k]), m.components[k])
        ref.align_references(acc)  # (summed about the component's own mean)
        np.testing.assert_allclose(acc.to_array(), ref.to_array(), rtol=1e-12, atol=1e-9)
    mix = MixtureEstimator([MultivariateGaussianEstimator(dim=3)] * 3).accumulator_factory().make()
    assert mix.units.stack_update is not None


def test_em_trajectory_and_parameters_match_sklearn_full():
    x = clustered_rows()
    rng = np.random.default_rng(7)
    weights = np.array([0.2, 0.3, 0.5])
    means = x[rng.choice(len(x), 3, replace=False)]
    precisions = np.array([np.linalg.inv(np.cov(x.T) * s) for s in (0.6, 1.0, 1.4)])
    precisions = 0.5 * (precisions + precisions.transpose(0, 2, 1))
    covs = [np.linalg.inv(p) for p in precisions]
    init = MixtureDistribution([MultivariateGaussianDistribution(m, 0.5 * (c + c.T))
                                for m, c in zip(means, covs)], weights)
    iterations = 15
    ref, gm = sklearn_trajectory(x, "full", weights, means, precisions, iterations)
    fit = mixfold.fit(x, MixtureEstimator([MultivariateGaussianEstimator()] * 3), init=init,
                      max_iter=iterations, tol=0.0, progress=False)
    ll = np.array(fit.log_likelihood)
    assert len(ll) == iterations and ll[-1] - ll[0] > 0.5  # EM moved a long way
    assert ll[0] == pytest.approx(init.seq_log_density(init.encoder().encode(x)).mean(),
                                  rel=1e-13)
    np.testing.assert_allclose(ll, ref, rtol=1e-8)
    model = fit.model
    assert max_relative_difference(model.weights, gm.weights_) < 1e-8
    assert max_relative_difference([c.mu for c in model.components], gm.means_) < 1e-8
    assert max_relative_difference([c.cov for c in model.components], gm.covariances_) < 1e-8


def test_seeded_mixture_fit_recovers_separated_clusters():
    truth = MixtureDistribution([
        MultivariateGaussianDistribution([-6.0, 0.0, 1.0], [[1.0, 0.5, 0.0], [0.5, 1.0, 0.2],
                                                           [0.0, 0.2, 0.5]]),
        MultivariateGaussianDistribution([0.0, 6.0, -1.0], [[0.5, -0.3, 0.0], [-0.3, 2.0, 0.0],
                                                           [0.0, 0.0, 1.0]]),
        MultivariateGaussianDistribution([6.0, -3.0, 0.0], np.diag([2.0, 1.0, 0.3]))],
        [0.3, 0.3, 0.4])
    x = truth.sampler(0).sample(20_000)
    fit = mixfold.fit(x, MixtureEstimator([MultivariateGaussianEstimator()] * 3), seed=1,
                      progress=False)
    assert fit.converged
    model = fit.model
    order = np.argsort([c.mu[0] for c in model.components])
    np.testing.assert_allclose(model.weights[order], truth.weights, atol=0.015)
    for i, c in zip(order, truth.components):
        np.testing.assert_allclose(model.components[i].mu, c.mu, atol=0.06)
        np.testing.assert_allclose(model.components[i].cov, c.cov, atol=0.08)
    ll = fit.log_likelihood
    assert all(b >= a - 1e-12 for a, b in zip(ll, ll[1:]))


def test_tied_components_share_one_factor_and_score_as_scipy():
    # a tied mixture's components whiten each block once (one GEMM for all of them)
    from scipy.stats import multivariate_normal

    rng = np.random.default_rng(7)
    d, k = 5, 4
    a = rng.normal(size=(d, d))
    cov = a @ a.T + d * np.eye(d)
    means = rng.normal(0, 2, (k, d))
    comps = MultivariateGaussianDistribution.tied(means, cov)
    assert all(c.precision_cholesky is comps[0].precision_cholesky for c in comps)
    x = rng.normal(0, 3, (1000, d))  # more rows than one block
    enc = comps[0].encoder().encode(x)
    got = MultivariateGaussianDistribution.stack_log_density(comps, enc)
    want = np.stack([multivariate_normal(m, cov).logpdf(x) for m in means], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    part = MultivariateGaussianDistribution.stack_log_density(comps, enc, units=(1, 3))
    assert np.array_equal(part, got[:, 1:3])  # a range of components: the same bits
