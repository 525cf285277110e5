"""SQUAREM (``optimize(accelerate="squarem")``): the same fixed point as plain EM in fewer folds,
never a fall, on every backend; the fallback for families without a flat parameter vector."""

from __future__ import annotations


import numpy as np
import pytest

import mixfold as mf
from mixfold.acceleration import Squarem
from mixfold.families._flat import from_flat, to_flat


def overlapping_mixture(n: int = 3000, seed: int = 0, spread: float = 1.0) -> np.ndarray:
    """Three overlapping 1-D clusters: plain EM crawls to its optimum (the more, the closer
    they are: their means are ``spread`` times 0, 1.8 and 4.5)."""
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(m * spread, s, n // 3)
                           for m, s in ((0, 1.0), (1.8, 0.8), (4.5, 1.2))])


def gaussian_mixture_start() -> mf.MixtureDistribution:
    return mf.MixtureDistribution([mf.GaussianDistribution(-1.0, 2.0),
                                   mf.GaussianDistribution(2.0, 2.0),
                                   mf.GaussianDistribution(5.0, 2.0)], [0.3, 0.3, 0.4])


def flat_parameters(model: mf.Distribution) -> np.ndarray:
    return to_flat(model)


def never_falls(result: mf.FitResult) -> bool:
    ll = np.asarray(result.log_likelihood)
    return bool(np.all(np.diff(ll) >= -1e-12 * np.abs(ll[1:])))


CASES = {
    "gaussian mixture": (lambda: overlapping_mixture(spread=1.8), gaussian_mixture_start,
                         lambda: mf.MixtureEstimator([mf.GaussianEstimator()] * 3)),
    "full-covariance mixture": (
        lambda: np.column_stack([overlapping_mixture(),
                                 overlapping_mixture(seed=1)[::-1] * 0.5]),
        lambda: mf.MixtureDistribution(
            [mf.MultivariateGaussianDistribution([m, m / 2], np.eye(2) * 2) for m in (-1, 2, 5)],
            [0.3, 0.3, 0.4]),
        lambda: mf.MixtureEstimator([mf.MultivariateGaussianEstimator()] * 3)),
    "Gaussian hidden Markov": (
        lambda: [overlapping_mixture(300, seed=s) for s in range(10)],
        lambda: mf.HiddenMarkovDistribution(
            [mf.GaussianDistribution(m, 2.0) for m in (-1, 2, 5)], [0.3, 0.3, 0.4],
            np.full((3, 3), 0.2) + np.eye(3) * 0.4),
        lambda: mf.HiddenMarkovEstimator([mf.GaussianEstimator()] * 3)),
    "mixture of records": (
        lambda: mixed_records(),
        lambda: mf.MixtureDistribution([mf.RecordDistribution({
            "x": mf.GaussianDistribution(m, 2.0), "c": mf.CategoricalDistribution(p),
            "n": mf.PoissonDistribution(lam),
            "t": mf.OptionalDistribution(mf.ExponentialDistribution(rate), 0.2)})
            for m, p, lam, rate in ((-1.0, {"a": 0.5, "b": 0.3, "c": 0.2}, 2.0, 1.0),
                                    (3.0, {"a": 0.2, "b": 0.3, "c": 0.5}, 5.0, 0.3))],
            [0.5, 0.5]),
        lambda: mf.MixtureEstimator([mf.RecordEstimator({
            "x": mf.GaussianEstimator(), "c": mf.CategoricalEstimator(),
            "n": mf.PoissonEstimator(),
            "t": mf.OptionalEstimator(mf.ExponentialEstimator())})] * 2)),
}


def mixed_records(n: int = 600, seed: int = 3) -> list[dict]:
    """Two overlapping groups of records: a Gaussian, a categorical, a Poisson count and an
    exponential time that is missing in about one row in ten."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        g = i % 2
        rows.append({"x": rng.normal((0.0, 2.0)[g], 1.5),
                     "c": rng.choice(["a", "b", "c"], p=((0.6, 0.3, 0.1), (0.2, 0.3, 0.5))[g]),
                     "n": int(rng.poisson((2.0, 4.0)[g])),
                     "t": None if rng.random() < 0.1 else rng.exponential((1.0, 2.5)[g])})
    return rows


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if "full" in c else c
                                  for c in CASES])
def test_squarem_reaches_the_fixed_point_of_plain_em_never_falling(case):
    rows, start, estimator = CASES[case]
    data, init = rows(), start()
    plain = mf.fit(data, estimator(), init=init, tol=1e-14, max_iter=20000, progress=False)
    fast = mf.fit(data, estimator(), init=init, tol=1e-14, max_iter=20000,
                  accelerate="squarem", progress=False)
    assert plain.converged and fast.converged
    np.testing.assert_allclose(flat_parameters(fast.model), flat_parameters(plain.model),
                               rtol=1e-6, atol=1e-6)
    assert fast.final_log_likelihood >= plain.final_log_likelihood - 1e-12
    assert never_falls(fast)


def test_squarem_needs_fewer_folds_where_em_crawls():
    est = mf.MixtureEstimator([mf.GaussianEstimator()] * 3)
    plain = mf.fit(overlapping_mixture(), est, init=gaussian_mixture_start(), tol=1e-10,
                   max_iter=20000, progress=False)
    fast = mf.fit(overlapping_mixture(), est, init=gaussian_mixture_start(), tol=1e-10,
                  max_iter=20000, accelerate="squarem", progress=False)
    assert fast.folds * 3 < plain.folds
    # every fold is one E-step: plain EM's are its initialisation-free iterations
    assert plain.folds == plain.iterations
    assert fast.folds >= fast.iterations


def test_where_em_contracts_fast_squarem_stops_no_later_than_plain_em():
    # a well-separated hidden Markov fit: EM converges in a few steps, where a cycle's
    # extrapolation has little to add; the first cycle extrapolates and the stopping test
    # is plain EM's (the remaining climb is below a step's gain)
    rows, start, estimator = CASES["Gaussian hidden Markov"]
    data = [overlapping_mixture(300, seed=s) for s in range(10)]
    plain = mf.fit(data, estimator(), init=start(), tol=1e-8, progress=False)
    fast = mf.fit(data, estimator(), init=start(), tol=1e-8, accelerate="squarem",
                  progress=False)
    assert plain.converged and fast.converged and fast.folds <= plain.folds
    # the same log-likelihood to within the tolerance both stopped at
    assert fast.final_log_likelihood == pytest.approx(plain.final_log_likelihood, rel=1e-8)
    assert never_falls(fast)


def test_convergence_waits_for_the_climb_that_em_has_left():
    """An EM step that changed the log-likelihood by ``d`` leaves about
    ``d lam^2 / (1 - lam^2)``, ``lam = 1 - 1 / a`` from the longer of the last two step
    lengths ``a``."""
    squarem = Squarem()
    tol = 1e-8
    assert squarem.settled(tol, tol)  # no cycle yet: plain EM's test
    squarem._lengths = [1.25]  # lam = 0.2: a step's gain exceeds what is left
    assert squarem.settled(tol, tol) and not squarem.settled(tol, 30 * tol)
    squarem._lengths = [50.0, 1.25]  # lam = 0.98 from the cycle before the last
    left = (0.98 ** 2) / (1 - 0.98 ** 2)
    assert not squarem.settled(tol, tol) and not squarem.settled(tol, 1.01 * tol / left)
    assert squarem.settled(tol, 0.99 * tol / left)


def linear_em_path(rate: float, start: float, steps: int) -> list[mf.GaussianDistribution]:
    """Models on the path of an EM map that is linear with one rate: the mean's error from
    the fixed point 2.0 shrinks by ``rate`` a step (the variance holds still)."""
    return [mf.GaussianDistribution(2.0 + start * rate ** k, 1.0) for k in range(steps)]


@pytest.mark.parametrize("rate", [0.3, 0.6, 0.7])
def test_on_a_linear_em_map_the_cycle_lands_on_the_fixed_point_and_reads_the_rate(rate):
    theta0, theta1, theta2 = linear_em_path(rate, 1.5, 3)
    squarem = Squarem()
    assert squarem.after_fold(theta0, theta1, -3.0) is theta1
    jump = squarem.after_fold(theta1, theta2, -2.0)
    # the step length is 1 / (1 - rate) (below the first cap, 4), the extrapolation exact
    assert squarem._lengths == [pytest.approx(1.0 / (1.0 - rate), rel=1e-12)]
    assert jump.mu == pytest.approx(2.0, abs=1e-12) and jump.sigma2 == pytest.approx(1.0)


@pytest.mark.parametrize("rate", [0.6, 0.8, 0.9])
def test_on_a_quadratic_log_likelihood_the_stopping_test_is_exact(rate):
    """Where EM's map is linear with one rate and the log-likelihood quadratic around its
    fixed point, ``ll = top - c e^2``, the remaining-climb test holds exactly when the climb
    EM has left after the step is at most ``tol``: no earlier (a stop below the optimum by
    more than tol), no later."""
    top, c, tol = -10.0, 3.0, 1e-8
    squarem = Squarem()
    theta0, theta1, theta2 = linear_em_path(rate, 1.5, 3)
    squarem.after_fold(theta0, theta1, -3.0)
    squarem.after_fold(theta1, theta2, -2.0)  # one cycle: the rate is known
    outcomes = set()
    for error in np.geomspace(1e-6, 1e-3, 200):  # the mean's error before an EM step
        gained = c * error ** 2 * (1.0 - rate ** 2)
        before = top - c * error ** 2
        left = c * (rate * error) ** 2  # the climb that remains after the step
        settled = squarem.settled(tol, gained / abs(before))
        # the loop judges the step relative to the log-likelihood before it, as plain EM
        assert settled == (left <= tol * abs(before)) or \
            abs(left / (tol * abs(before)) - 1) < 1e-9
        outcomes.add(settled)
    assert outcomes == {True, False}  # the sweep crosses the boundary


def test_flat_coordinates_are_the_parameters_as_the_m_step_writes_them():
    model = mf.MixtureDistribution(
        [mf.MultivariateGaussianDistribution([0.0, 1.0], [[2.0, 0.3], [0.3, 1.0]]),
         mf.MultivariateGaussianDistribution([1.0, 0.0], [[1.0, 0.0], [0.0, 4.0]])],
        [0.25, 0.75])
    np.testing.assert_allclose(to_flat(model), [0.25, 0.75, 0.0, 1.0, 2.0, 0.3, 1.0,
                                                1.0, 0.0, 1.0, 0.0, 4.0])
    # a covariance that is not positive definite, a variance below zero: no model
    with pytest.raises(mf.ParameterError, match="not positive definite"):
        from_flat(model, [0.25, 0.75, 0.0, 1.0, 2.0, 3.0, 1.0, 1.0, 0.0, 1.0, 0.0, 4.0])
    with pytest.raises(mf.ParameterError, match="below zero"):
        from_flat(mf.GaussianDistribution(0.0, 1.0), [0.0, -0.5])


def test_folds_count_the_initialisation_fold():
    x = overlapping_mixture()
    result = mf.fit(x, mf.MixtureEstimator([mf.GaussianEstimator()] * 2), max_iter=7, tol=0.0,
                    progress=False)
    assert (result.iterations, result.folds) == (7, 8)


def test_a_family_without_coordinates_runs_plain_em_and_says_so_once():
    docs = [["a", "b", "a"], ["c", "d"], ["a", "c", "c"], ["b", "d", "d"]] * 10
    est = mf.LDAEstimator(2)
    plain = mf.fit(docs, est, max_iter=5, progress=False)
    with pytest.warns(UserWarning, match="LDA declares no parameter_coordinates") as caught:
        fast = mf.fit(docs, est, max_iter=5, accelerate="squarem", progress=False)
    assert sum("parameter_coordinates" in str(w.message) for w in caught) == 1
    assert fast.log_likelihood == plain.log_likelihood
    assert any("running plain EM" in note for note in fast.warnings)


def test_accelerate_is_checked_up_front():
    with pytest.raises(ValueError, match=r"accelerate must be None or one of \['squarem'\], "
                                         r"got 'anderson'"):
        mf.fit(np.arange(10.0), mf.GaussianEstimator(), accelerate="anderson")
    with pytest.raises(ValueError, match="checkpoint does not record"):
        mf.fit(np.arange(10.0), mf.GaussianEstimator(), accelerate="squarem",
               checkpoint="/tmp/never-written.json")


def test_an_extrapolated_point_that_scores_lower_is_dropped_for_theta2():
    """The cycle's bookkeeping: theta0, theta1, then the extrapolation; dropping it goes on
    from theta2 and shrinks the cap."""
    models = [mf.GaussianDistribution(0.0, 1.0), mf.GaussianDistribution(1.0, 1.5),
              mf.GaussianDistribution(1.5, 1.7)]
    squarem = Squarem()
    squarem.step_cap = 16.0
    assert squarem.after_fold(models[0], models[1], -3.0) is models[1]
    jump = squarem.after_fold(models[1], models[2], -2.0)
    assert squarem.extrapolating and jump.mu > 1.5
    # r = (1, 0.5), v = (-0.5, -0.3) in (mu, sigma2): the S3 step |r| / |v|
    r = np.array([1.0, 0.5])
    v = np.array([-0.5, -0.3])
    step = np.linalg.norm(r) / np.linalg.norm(v)
    point = np.array([0.0, 1.0]) + 2 * step * r + step ** 2 * v
    np.testing.assert_allclose([jump.mu, jump.sigma2], point, rtol=1e-12)
    assert squarem.rejected() is models[2]
    assert not squarem.extrapolating and squarem.step_cap == 4.0 and squarem.dropped == 1


def test_an_extrapolation_that_leaves_the_simplex_backs_off_toward_theta2():
    def mixture(w):
        return mf.MixtureDistribution([mf.GaussianDistribution(0, 1),
                                       mf.GaussianDistribution(3, 1)], [w, 1 - w])

    squarem = Squarem()
    squarem.step_cap = 64.0
    squarem.after_fold(mixture(0.5), mixture(0.3), -3.0)
    jump = squarem.after_fold(mixture(0.3), mixture(0.2), -2.0)
    # the weight falls 0.2 then 0.1: the S3 step (2.24) would take it below zero
    assert jump is not None and 0.0 <= jump.weights[0] < 0.2


def test_flat_coordinates_round_trip_every_declared_family():
    record = mf.RecordDistribution({
        "x": mf.GaussianDistribution(1.0, 2.0),
        "c": mf.CategoricalDistribution({"a": 0.2, "b": 0.0, "c": 0.8}),
        "n": mf.PoissonDistribution(3.5),
        "o": mf.OptionalDistribution(mf.ExponentialDistribution(0.5), 0.1),
        "m": mf.MultivariateGaussianDistribution([0.0, 1.0], [[2.0, 0.3], [0.3, 1.0]]),
    })
    model = mf.MixtureDistribution([record, record], [0.25, 0.75])
    back = from_flat(model, to_flat(model))
    assert back.to_dict().keys() == model.to_dict().keys()
    np.testing.assert_allclose(to_flat(back), to_flat(model), rtol=1e-14, atol=1e-14)
    assert back.components[0].fields["c"].prob("b") == 0.0  # a zero stays exactly zero


def test_squarem_on_worker_processes_matches_local():
    est = mf.MixtureEstimator([mf.GaussianEstimator()] * 3)
    x = overlapping_mixture(spread=1.8)
    kwargs = dict(init=gaussian_mixture_start(), tol=1e-12, max_iter=20000,
                  accelerate="squarem", progress=False)
    local = mf.fit(x, est, **kwargs)
    pooled = mf.fit(x, est, backend="mp", num_workers=2, **kwargs)
    assert pooled.backend == "mp" and pooled.converged and never_falls(pooled)
    np.testing.assert_allclose(to_flat(pooled.model), to_flat(local.model), rtol=1e-6,
                               atol=1e-6)
    assert pooled.final_log_likelihood == pytest.approx(local.final_log_likelihood, rel=1e-12)


@pytest.mark.slow
def test_squarem_on_a_dask_local_cluster_matches_local_in_fewer_folds():
    from mixfold.backends.dask import local_dask_client

    client = local_dask_client(2)
    try:
        est = mf.MixtureEstimator([mf.GaussianEstimator()] * 3)
        x = overlapping_mixture(spread=1.8)
        kwargs = dict(init=gaussian_mixture_start(), tol=1e-14, max_iter=20000, progress=False)
        local = mf.fit(x, est, accelerate="squarem", **kwargs)
        plain = mf.fit(x, est, backend=client, **kwargs)
        fast = mf.fit(x, est, backend=client, accelerate="squarem", **kwargs)
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
    assert fast.backend == "dask" and fast.converged
    np.testing.assert_allclose(to_flat(fast.model), to_flat(plain.model), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(to_flat(fast.model), to_flat(local.model), rtol=1e-6, atol=1e-6)
    assert fast.folds * 2 < plain.folds
    assert never_falls(fast)


def test_every_registered_family_declares_its_coordinates():
    # a family without them falls back to plain EM (said once); LDA's variational parameters
    # are not a model's (its topics are Dirichlet posteriors refitted per document)
    from mixfold.families._protocol import _FAMILIES

    undeclared = sorted(n for n, c in _FAMILIES.items() if c.parameter_coordinates is None)
    assert undeclared == ["LDA"]
