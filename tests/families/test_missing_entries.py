"""Missing entries (NaN) in DiagonalGaussian and MultivariateGaussian rows (``missing=True``)."""

import itertools
import json
import warnings

import numpy as np
import pytest
from scipy import stats

import mixfold
from mixfold import (CategoricalDistribution, CategoricalEstimator, DataError,
                     HiddenMarkovDistribution, HiddenMarkovEstimator, MissingEntriesWarning,
                     MixtureDistribution, MixtureEstimator, ParameterError, RecordDistribution,
                     RecordEstimator)
from mixfold.families._encoders import VectorEncoder
from mixfold.families._missing import MaskedRows, MissingPatterns
from mixfold.families.diagonal_gaussian import (DiagonalGaussianAccumulator,
                                                DiagonalGaussianDistribution,
                                                DiagonalGaussianEstimator)
from mixfold.families.multivariate_gaussian import (MultivariateGaussianAccumulator,
                                                    MultivariateGaussianDistribution,
                                                    MultivariateGaussianEstimator)
from mixfold.parallel.model_parallel import ModelParallelEstimator
from mixfold.precision import BandSupportError, resolve_precision
from mixfold.spec import estimator_from_spec, spec_from_estimator

NAN = float("nan")


def random_cov(rng, d, scale=1.0):
    a = rng.normal(size=(d, d))
    return scale * (a @ a.T / d + 0.3 * np.eye(d))


def remove_at_random(rng, x, fraction=0.2):
    out = x.copy()
    out[rng.random(x.shape) < fraction] = np.nan
    return out


def masked(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingEntriesWarning)
        return VectorEncoder(x.shape[1], missing=True).encode(x)


def scipy_marginal(mu, cov, row):
    seen = ~np.isnan(row)
    if not seen.any():
        return 0.0
    return stats.multivariate_normal(mu[seen], cov[np.ix_(seen, seen)]).logpdf(row[seen])


# ---------------------------------------------------------------------------------------------
# log-densities


@pytest.mark.parametrize("d,shift", [(1, 0.0), (3, 0.0), (5, 50.0)])
def test_full_covariance_log_density_is_scipys_marginal(d, shift, rng):
    mu, cov = rng.normal(size=d) + shift, random_cov(rng, d)
    x = remove_at_random(rng, rng.multivariate_normal(mu, cov, size=300), 0.35)
    x[0] = np.nan  # nothing observed: the empty marginal, density 1
    dist = MultivariateGaussianDistribution(mu, cov, missing=True)
    got = dist.seq_log_density(masked(x))
    want = [scipy_marginal(mu, cov, row) for row in x]
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11)
    assert got[0] == 0.0


def test_diagonal_log_density_is_scipys_marginal(rng):
    mu, var = rng.normal(size=4), rng.uniform(0.5, 3.0, size=4)
    x = remove_at_random(rng, rng.normal(mu, np.sqrt(var), size=(200, 4)), 0.3)
    dist = DiagonalGaussianDistribution(mu, var, missing=True)
    want = [scipy_marginal(mu, np.diag(var), row) for row in x]
    np.testing.assert_allclose(dist.seq_log_density(masked(x)), want, rtol=1e-12, atol=1e-12)


def test_stacked_scoring_of_masked_rows_is_per_component(rng):
    x = masked(remove_at_random(rng, rng.normal(size=(100, 3))))
    for comps in ([MultivariateGaussianDistribution(rng.normal(size=3), random_cov(rng, 3))
                   for _ in range(3)],
                  [DiagonalGaussianDistribution(rng.normal(size=3), rng.uniform(1, 2, 3))
                   for _ in range(3)]):
        stacked = type(comps[0]).stack_log_density(comps, x)
        for k, c in enumerate(comps):
            np.testing.assert_array_equal(stacked[:, k], c.seq_log_density(x))


def test_complete_rows_take_the_complete_data_path_bit_for_bit(rng):
    mu, cov = rng.normal(size=3), random_cov(rng, 3)
    x = rng.multivariate_normal(mu, cov, size=50)
    plain = MultivariateGaussianDistribution(mu, cov)
    assert isinstance(masked(x), MaskedRows)
    np.testing.assert_array_equal(plain.seq_log_density(masked(x)),
                                  plain.seq_log_density(VectorEncoder(3).encode(x)))


def test_patterns_group_rows_by_what_they_miss():
    x = np.array([[1.0, NAN, 3.0], [NAN, NAN, NAN], [4.0, NAN, 6.0], [NAN, 2.0, NAN]])
    p = MissingPatterns(x)
    assert p.n_missing.tolist() == [1, 3, 1, 2] and p.n_all_missing == 1
    assert [(g.r, g.index.tolist(), g.rows.tolist()) for g in p.groups] == \
        [(1, [[1]], [0, 2]), (2, [[0, 2]], [3]), (3, [[0, 1, 2]], [1])]


# ---------------------------------------------------------------------------------------------
# the E-step


def test_full_covariance_statistics_are_conditional_expectations(rng):
    # reference: each row on its own, with numpy's inverse of its observed block
    mu, cov = rng.normal(size=4), random_cov(rng, 4)
    x = remove_at_random(rng, rng.multivariate_normal(mu, cov, size=60), 0.3)
    x[5] = np.nan
    w = rng.uniform(0.5, 2.0, size=60)
    dist = MultivariateGaussianDistribution(mu, cov, missing=True)
    acc = MultivariateGaussianEstimator(4, missing=True).accumulator_factory().make()
    acc.seq_update(masked(x), w, dist)
    s0, s1, s2 = 0.0, np.zeros(4), np.zeros((4, 4))
    for row, wi in zip(x, w):
        m, o = np.isnan(row), ~np.isnan(row)
        if not o.any():
            continue
        gain = cov[np.ix_(m, o)] @ np.linalg.inv(cov[np.ix_(o, o)])
        filled = row.copy()
        filled[m] = mu[m] + gain @ (row[o] - mu[o])
        cond = np.zeros((4, 4))
        cond[np.ix_(m, m)] = cov[np.ix_(m, m)] - gain @ cov[np.ix_(o, m)]
        s0, s1, s2 = s0 + wi, s1 + wi * filled, s2 + wi * (np.outer(filled, filled) + cond)
    acc.recentre(np.zeros(4))  # the sums are kept about a reference point: read them raw
    assert acc.weight[0] == pytest.approx(s0, rel=1e-14)
    np.testing.assert_allclose(acc.sum_x, s1, rtol=1e-11)
    np.testing.assert_allclose(acc.sum_xx, s2, rtol=1e-11)


def test_diagonal_statistics_drop_missing_coordinates(rng):
    x = remove_at_random(rng, rng.normal(size=(80, 3)))
    w = rng.uniform(0.5, 2.0, size=80)
    acc = DiagonalGaussianEstimator(3, missing=True).accumulator_factory().make()
    acc.seq_update(masked(x), w, None)
    seen = ~np.isnan(x)
    acc.recentre(np.zeros(3))  # the sums are kept about a reference point: read them raw
    np.testing.assert_allclose(acc.weight, w @ seen, rtol=1e-14)
    np.testing.assert_allclose(acc.sum_x, w @ np.nan_to_num(x), rtol=1e-13)
    np.testing.assert_allclose(acc.sum_xx, w @ np.nan_to_num(x) ** 2, rtol=1e-13)
    # the payload keeps a fixed size: 4 D for the diagonal (weights, sums, squares and the
    # reference, per coordinate), the complete layout for the full
    assert acc.payload_size() == 12
    full = MultivariateGaussianEstimator(3, missing=True).accumulator_factory().make()
    assert full.payload_size() == MultivariateGaussianAccumulator(3).payload_size()
    assert DiagonalGaussianAccumulator(3).payload_size() == 10


# ---------------------------------------------------------------------------------------------
# fits


def fit_error(mu, cov, ref_mu, ref_cov):
    return np.linalg.norm(mu - ref_mu) + np.linalg.norm(cov - ref_cov)


def test_fit_beats_listwise_deletion_and_mean_imputation(rng):
    mu = np.array([1.0, -1.0, 0.5, 2.0])
    cov = np.array([[2.0, 1.2, 0.8, 0.3], [1.2, 1.5, 0.6, 0.2],
                    [0.8, 0.6, 1.0, 0.4], [0.3, 0.2, 0.4, 0.8]])
    x = rng.multivariate_normal(mu, cov, size=4000)
    xm = remove_at_random(rng, x, 0.2)
    full = MultivariateGaussianEstimator()
    complete = mixfold.optimize(x, full, progress=False)
    ours = mixfold.optimize(xm, MultivariateGaussianEstimator(missing=True), progress=False)
    listwise = mixfold.optimize(xm[~np.isnan(xm).any(axis=1)], full, progress=False)
    imputed = mixfold.optimize(np.where(np.isnan(xm), np.nanmean(xm, axis=0), xm), full,
                               progress=False)
    errors = {name: fit_error(m.mu, m.cov, complete.mu, complete.cov)
              for name, m in [("ours", ours), ("listwise", listwise), ("imputed", imputed)]}
    assert errors["ours"] < 0.8 * errors["listwise"] and errors["ours"] < 0.3 * errors["imputed"]
    # the diagonal: each coordinate from the rows that have it
    diag = mixfold.optimize(xm, DiagonalGaussianEstimator(missing=True), progress=False)
    np.testing.assert_allclose(diag.mu, np.nanmean(xm, axis=0), rtol=1e-12)
    np.testing.assert_allclose(diag.sigma2, np.nanvar(xm, axis=0) + 1e-6, rtol=1e-10)
    d_complete = np.var(x, axis=0)
    d_imputed = np.var(np.where(np.isnan(xm), np.nanmean(xm, axis=0), xm), axis=0)
    assert np.abs(diag.sigma2 - d_complete).sum() < 0.3 * np.abs(d_imputed - d_complete).sum()


def two_clusters(rng, n=3000, d=3):
    a = rng.multivariate_normal(np.zeros(d), random_cov(rng, d), size=n // 2)
    b = rng.multivariate_normal(np.full(d, 4.0), random_cov(rng, d, 0.5), size=n - n // 2)
    return np.concatenate([a, b])


@pytest.mark.parametrize("component", [MultivariateGaussianEstimator, DiagonalGaussianEstimator])
def test_mixture_log_likelihood_never_decreases(component, rng):
    x = remove_at_random(rng, two_clusters(rng))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingEntriesWarning)
        result = mixfold.fit(x, MixtureEstimator([component(missing=True)] * 2), max_iter=40,
                             tol=1e-12, progress=False)
    assert len(result.log_likelihood) > 3
    assert np.diff(result.log_likelihood).min() >= -1e-12
    centres = sorted(c.mu.mean() for c in result.model.components)
    assert centres == pytest.approx([0.0, 4.0], abs=0.25)
    assert all(c.missing for c in result.model.components)


def test_mixture_fit_beats_mean_imputation_against_the_complete_fit(rng):
    x = two_clusters(rng)
    xm = remove_at_random(rng, x)
    est = MixtureEstimator([MultivariateGaussianEstimator()] * 2)
    complete = mixfold.optimize(x, est, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingEntriesWarning)
        ours = mixfold.optimize(xm, MixtureEstimator([MultivariateGaussianEstimator(
            missing=True)] * 2), progress=False)
    imputed = mixfold.optimize(np.where(np.isnan(xm), np.nanmean(xm, axis=0), xm), est,
                               progress=False)

    def error(m):
        order = np.argsort([c.mu.sum() for c in m.components])
        ref = np.argsort([c.mu.sum() for c in complete.components])
        return sum(fit_error(m.components[i].mu, m.components[i].cov,
                             complete.components[j].mu, complete.components[j].cov)
                   for i, j in zip(order, ref))

    assert error(ours) < 0.5 * error(imputed)


def test_hidden_markov_with_missing_entries_is_the_brute_force_sum(rng):
    emissions = [MultivariateGaussianDistribution([0.0, 0.0], [[1.0, 0.5], [0.5, 1.0]],
                                                  missing=True),
                 MultivariateGaussianDistribution([3.0, 1.0], [[0.5, 0.0], [0.0, 2.0]],
                                                  missing=True)]
    initial, trans = np.array([0.6, 0.4]), np.array([[0.8, 0.2], [0.3, 0.7]])
    hmm = HiddenMarkovDistribution(emissions, initial, trans)
    seq = [[0.5, NAN], [NAN, NAN], [2.5, 1.5], [NAN, 0.0]]
    want = -np.inf
    for path in itertools.product(range(2), repeat=len(seq)):
        lp = np.log(initial[path[0]]) + sum(np.log(trans[a, b]) for a, b in zip(path, path[1:]))
        lp += sum(scipy_marginal(emissions[s].mu, emissions[s].cov, np.array(r))
                  for s, r in zip(path, seq))
        want = np.logaddexp(want, lp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingEntriesWarning)
        assert hmm.log_density(seq) == pytest.approx(want, rel=1e-12)
        rows = hmm.sampler(1, sample_length=8).sample(150)
    rows = [np.where(rng.random((len(r), 2)) < 0.2, np.nan, np.asarray(r, dtype=float))
            for r in rows]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingEntriesWarning)
        result = mixfold.fit(rows, HiddenMarkovEstimator(
            [MultivariateGaussianEstimator(missing=True)] * 2), init=hmm, max_iter=15,
            tol=1e-12, progress=False)
    assert np.diff(result.log_likelihood).min() >= -1e-12


@pytest.mark.parametrize("component", [MultivariateGaussianEstimator, DiagonalGaussianEstimator])
def test_record_field_with_missing_entries_in_a_mixture(component, rng):
    x = remove_at_random(rng, two_clusters(rng, n=1000, d=2))
    colour = np.where(np.arange(1000) < 500, "red", "blue")
    rows = [{"v": list(v), "colour": c} for v, c in zip(x, colour)]
    est = MixtureEstimator([RecordEstimator({"v": component(missing=True),
                                             "colour": CategoricalEstimator()})] * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingEntriesWarning)
        result = mixfold.fit(rows, est, max_iter=30, tol=1e-12, progress=False)
    assert np.diff(result.log_likelihood).min() >= -1e-12
    model = result.model
    # the record's log-density is the vector's marginal plus the categorical's
    comp = model.components[0]
    v = comp.fields["v"]
    cov = v.cov if hasattr(v, "cov") else np.diag(v.sigma2)
    row = {"v": [0.3, NAN], "colour": "red"}
    want = scipy_marginal(v.mu, cov, np.array(row["v"])) + \
        comp.fields["colour"].log_density("red")
    assert comp.log_density(row) == pytest.approx(want, rel=1e-12)
    assert isinstance(comp, RecordDistribution)
    assert isinstance(comp.fields["colour"], CategoricalDistribution)


def test_mp_backend_fits_the_same_model(rng):
    x = remove_at_random(rng, two_clusters(rng, n=2000))
    est = MixtureEstimator([MultivariateGaussianEstimator(missing=True)] * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingEntriesWarning)
        local = mixfold.fit(x, est, max_iter=8, tol=0.0, progress=False)
        mp = mixfold.fit(x, est, max_iter=8, tol=0.0, backend="mp", num_workers=2,
                         progress=False)
    np.testing.assert_allclose(mp.log_likelihood, local.log_likelihood, rtol=1e-12)
    for a, b in zip(mp.model.components, local.model.components):
        np.testing.assert_allclose(a.mu, b.mu, rtol=1e-10)
        np.testing.assert_allclose(a.cov, b.cov, rtol=1e-10)


# ---------------------------------------------------------------------------------------------
# options, errors, files


@pytest.mark.parametrize("estimator", [MultivariateGaussianEstimator, DiagonalGaussianEstimator])
def test_nan_is_a_data_error_without_missing(estimator):
    x = np.array([[1.0, 2.0], [3.0, NAN]])
    with pytest.raises(DataError, match=r"row 1.*missing=True"):
        mixfold.optimize(x, estimator(), progress=False)
    with pytest.raises(DataError, match="finite number or NaN"):
        mixfold.optimize(np.array([[1.0, np.inf]]), estimator(missing=True), progress=False)
    with pytest.raises(ParameterError, match="missing must be True or False"):
        estimator(missing="yes")


def test_rows_with_nothing_observed_are_counted_and_add_nothing(rng):
    x = rng.normal(size=(50, 2))
    x[[3, 7]] = np.nan
    with pytest.warns(MissingEntriesWarning, match="2 of 50 rows"):
        fitted = mixfold.optimize(x, MultivariateGaussianEstimator(missing=True), progress=False)
    ref = mixfold.optimize(np.delete(x, [3, 7], axis=0), MultivariateGaussianEstimator(),
                           progress=False)
    np.testing.assert_allclose(fitted.mu, ref.mu, rtol=1e-12)
    np.testing.assert_allclose(fitted.cov, ref.cov, rtol=1e-12)


def test_bands_refuse_rows_with_missing_entries(rng):
    x = masked(remove_at_random(rng, rng.normal(size=(20, 2))))
    for dist in (MultivariateGaussianDistribution([0, 0], np.eye(2), missing=True),
                 DiagonalGaussianDistribution([0, 0], [1, 1], missing=True)):
        with pytest.raises(BandSupportError, match="missing entries"):
            dist.seq_log_density(x, resolve_precision("float16"))


@pytest.mark.parametrize("dist", [
    MultivariateGaussianDistribution([0.5, 1.0], [[1.0, 0.2], [0.2, 2.0]], missing=True),
    DiagonalGaussianDistribution([0.5, 1.0], [1.0, 2.0], missing=True)])
def test_model_files_and_specs_keep_missing(dist, tmp_path):
    path = mixfold.save(dist, tmp_path / "m.json")
    assert json.loads(path.read_text())["model"]["missing"] is True
    back = mixfold.load(path)
    assert back == dist and back.missing and back.estimator().missing
    plain = type(dist).from_dict({k: v for k, v in dist.to_dict().items() if k != "missing"})
    assert not plain.missing and "missing" not in plain.to_dict()
    est = dist.estimator()
    spec = spec_from_estimator(est)
    assert estimator_from_spec(spec).missing


def test_a_mixture_in_a_band_refuses_rows_with_missing_entries_and_not_complete_rows(rng):
    x = two_clusters(rng, n=400)
    est = MixtureEstimator([MultivariateGaussianEstimator(missing=True)] * 2)
    for precision in ("dd", "float16"):
        with pytest.raises(BandSupportError, match="missing entries"):
            mixfold.fit(remove_at_random(rng, x), est, max_iter=2, precision=precision,
                        progress=False)
    band = mixfold.fit(x, est, max_iter=3, tol=0.0, precision="dd", progress=False)
    plain = mixfold.fit(x, MixtureEstimator([MultivariateGaussianEstimator()] * 2), max_iter=3,
                        tol=0.0, precision="dd", progress=False)
    np.testing.assert_allclose(band.log_likelihood, plain.log_likelihood, rtol=1e-13)


def test_a_start_decides_how_its_rows_are_encoded(rng):
    x = remove_at_random(rng, two_clusters(rng, n=400))
    comps = [MultivariateGaussianDistribution(np.zeros(3), np.eye(3)),
             MultivariateGaussianDistribution(np.full(3, 4.0), np.eye(3))]
    start = MixtureDistribution(comps, [0.5, 0.5])
    est = MixtureEstimator([MultivariateGaussianEstimator(missing=True)] * 2)
    with pytest.raises(DataError, match="on the starting model"):
        mixfold.fit(x, est, init=start, max_iter=2, progress=False)
    flagged = MixtureDistribution([MultivariateGaussianDistribution(c.mu, c.cov, missing=True)
                                   for c in comps], [0.5, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingEntriesWarning)
        ours = mixfold.fit(x, est, init=flagged, max_iter=5, progress=False)
        # a start made with missing=True opts in for an estimator made without it
        plain = mixfold.fit(x, MixtureEstimator([MultivariateGaussianEstimator()] * 2),
                            init=flagged, max_iter=5, progress=False)
    assert np.diff(ours.log_likelihood).min() >= -1e-12
    assert plain.log_likelihood == ours.log_likelihood


def test_model_parallel_components_fit_the_same_bits(rng):
    x = remove_at_random(rng, two_clusters(rng, n=1000))
    est = MixtureEstimator([MultivariateGaussianEstimator(missing=True)] * 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingEntriesWarning)
        serial = mixfold.fit(x, est, max_iter=4, tol=0.0, progress=False)
        threaded = mixfold.fit(x, ModelParallelEstimator(est, num_workers=2), max_iter=4,
                               tol=0.0, progress=False)
    assert threaded.log_likelihood == serial.log_likelihood


@pytest.mark.parametrize("entry", ["fit", "optimize"])
def test_rows_missing_every_entry_are_reported_at_the_users_line(entry):
    """The warning names the caller's file, not the encoder or the dispatch inside mixfold."""
    x = np.random.default_rng(0).normal(size=(40, 2))
    x[:3] = np.nan
    est = mixfold.DiagonalGaussianEstimator(missing=True)
    with pytest.warns(MissingEntriesWarning, match="3 of 40 rows") as caught:
        getattr(mixfold, entry)(x, est, max_iter=2, progress=False)
    (said,) = [w for w in caught if issubclass(w.category, MissingEntriesWarning)]
    assert said.filename == __file__
