"""The EM loop: initialisation, convergence, reporting, bad input."""

import warnings

import numpy as np
import pytest

import mixfold
from mixfold import (
    CategoricalDistribution,
    CategoricalEstimator,
    DataError,
    EMDecreaseWarning,
    GaussianDistribution,
    GaussianEstimator,
    MixtureDistribution,
    MixtureEstimator,
    NumericalError,
    RecordEstimator,
)


def mixture_data(n=6000, seed=0):
    truth = MixtureDistribution([GaussianDistribution(-4, 1), GaussianDistribution(0, 0.5),
                                 GaussianDistribution(5, 2)], [0.2, 0.5, 0.3])
    return truth.sampler(seed).sample(n)


def est3():
    return MixtureEstimator([GaussianEstimator()] * 3)


def test_seeded_start_does_not_depend_on_chunking():
    x = mixture_data(30_000)
    a = mixfold.optimize(x, est3(), max_iter=0, seed=7, chunk_rows=1000, progress=False)
    b = mixfold.optimize(x, est3(), max_iter=0, seed=7, chunk_rows=30_000, progress=False)
    c = mixfold.optimize(x, est3(), max_iter=0, seed=8, progress=False)
    for p, q in zip(a.components, b.components):
        assert p.mu == pytest.approx(q.mu, rel=1e-12) and p.sigma2 == pytest.approx(q.sigma2,
                                                                                  rel=1e-12)
    assert a != c  # the seed matters


def test_full_fit_does_not_depend_on_chunking():
    x = mixture_data()
    a = mixfold.optimize(x, est3(), seed=1, chunk_rows=333, progress=False)
    b = mixfold.optimize(x, est3(), seed=1, chunk_rows=100_000, progress=False)
    np.testing.assert_allclose(a.weights, b.weights, rtol=1e-9)
    assert a.fit_result.iterations == b.fit_result.iterations


def test_kmeans_plus_plus_start_finds_separated_clusters():
    x = mixture_data()
    m = mixfold.optimize(x, est3(), seed=0, progress=False)
    assert sorted(round(c.mu) for c in m.components) == [-4, 0, 5]


def test_fit_result_history():
    x = mixture_data()
    res = mixfold.fit(x, est3(), seed=0, tol=1e-8, progress=False)
    assert res.converged and res.stop_reason == "converged"
    assert len(res.log_likelihood) == len(res.seconds) == res.iterations
    assert all(s >= 0 for s in res.seconds) and res.n_rows == len(x)
    assert np.all(np.diff(res.log_likelihood) >= -1e-12)


def test_max_iter_bounds_the_fit():
    res = mixfold.fit(mixture_data(), est3(), max_iter=3, tol=0.0, progress=False)
    assert res.iterations == 3 and not res.converged and res.stop_reason == "max_iter"


def test_callbacks_see_each_iteration_and_can_stop():
    seen = []
    res = mixfold.fit(mixture_data(), est3(), tol=0.0, max_iter=50, progress=False,
                      callbacks=[lambda info: seen.append(info.iteration) or info.iteration == 4])
    assert seen == [0, 1, 2, 3, 4] and res.stop_reason == "callback"


def test_progress_bar_goes_to_stderr_and_ends_at_the_iterations_run(capsys):
    res = mixfold.fit(mixture_data(), est3(), seed=0, progress=True, max_iter=300, tol=1e-6)
    err = capsys.readouterr().err
    assert res.converged and res.iterations < 300
    final = err.split("\r")[-1]
    assert final.startswith("EM: 100%") and f" {res.iterations}/{res.iterations} " in final
    assert "mean log-lik" in final and "/300" not in final


def test_fit_warnings_point_at_the_callers_line():
    x = np.r_[np.zeros(50), np.ones(50)]  # three components on two values: one loses its rows
    with pytest.warns(mixfold.DegenerateFitWarning) as caught:
        mixfold.optimize(x, est3(), seed=0, progress=False)
    assert {w.filename for w in caught} == {__file__}


class WorseningEstimator(GaussianEstimator):
    """An M-step that moves the mean away from the data after the first step."""

    calls = 0

    def estimate(self, nobs, stats):
        d = super().estimate(nobs, stats)
        WorseningEstimator.calls += 1
        return GaussianDistribution(d.mu + 5.0 * WorseningEstimator.calls, d.sigma2)


def test_a_decrease_is_reported_and_not_accepted():
    x = np.random.default_rng(0).normal(size=100)
    with pytest.warns(EMDecreaseWarning):
        res = mixfold.fit(x, WorseningEstimator(), init=GaussianDistribution(0.0, 1.0),
                          progress=False, max_iter=10)
    assert res.stop_reason == "decrease" and res.warnings
    assert res.log_likelihood[-1] < res.log_likelihood[-2]
    # the returned model is the one that entered the iteration that went down
    assert res.iterations == len(res.log_likelihood) - 1


def test_non_finite_log_likelihood_raises_naming_the_row():
    init = CategoricalDistribution({"a": 1.0, "b": 0.0})
    with pytest.raises(NumericalError, match="row 2"):
        mixfold.optimize(["a", "a", "b"], CategoricalEstimator(), init=init, progress=False)


def test_init_model_is_used_as_given():
    init = MixtureDistribution([GaussianDistribution(-1, 1), GaussianDistribution(1, 1)],
                               [0.5, 0.5])
    m = mixfold.optimize(np.array([-1.0, 1.0]), MixtureEstimator([GaussianEstimator()] * 2),
                         init=init, max_iter=0, progress=False)
    assert m == init


@pytest.mark.parametrize("data", [[], np.zeros(0)])
def test_empty_data_is_refused(data):
    with pytest.raises(DataError, match="no rows"):
        mixfold.optimize(data, GaussianEstimator(), progress=False)


def test_negative_weights_are_refused_with_the_row():
    with pytest.raises(DataError) as err:
        mixfold.optimize([1.0, 2.0, 3.0], GaussianEstimator(), weights=[1.0, -1.0, 1.0],
                         progress=False)
    assert err.value.row == 1


def test_all_zero_weights_are_refused():
    with pytest.raises(DataError, match="sum to zero"):
        mixfold.optimize([1.0, 2.0], GaussianEstimator(), weights=[0.0, 0.0], progress=False)


@pytest.mark.parametrize("option,value", [("max_iter", -1), ("tol", float("nan")), ("seed", 1.5),
                                          ("chunk_rows", 0), ("precision", "float128"),
                                          ("backend", "nowhere"), ("init", "magic")])
def test_bad_options_are_refused_up_front(option, value):
    with pytest.raises(ValueError, match=option if option != "init" else "init"):
        mixfold.optimize([1.0, 2.0], GaussianEstimator(), progress=False, **{option: value})


def test_wrong_estimator_type():
    with pytest.raises(TypeError, match="Estimator"):
        mixfold.optimize([1.0], "gaussian")


def test_nothing_is_returned_half_fitted_on_bad_rows():
    est = RecordEstimator({"x": GaussianEstimator()})
    with pytest.raises(DataError):
        mixfold.optimize([{"x": 1.0}] * 5 + [{"x": float("inf")}], est, progress=False)


def test_float32_precision_runs_and_stays_close():
    x = mixture_data()
    a = mixfold.fit(x, est3(), seed=0, max_iter=5, tol=0, progress=False)
    b = mixfold.fit(x, est3(), seed=0, max_iter=5, tol=0, precision="float32", progress=False)
    assert b.precision == "float32"
    np.testing.assert_allclose(b.log_likelihood, a.log_likelihood, rtol=1e-5)


def test_no_warnings_on_a_clean_fit():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mixfold.optimize(mixture_data(), est3(), progress=False)


def test_n_init_keeps_the_best_of_the_seeded_starts():
    x = mixture_data(3000)
    singles = [mixfold.fit(x, est3(), seed=s, max_iter=30, progress=False) for s in (3, 4, 5)]
    best = mixfold.fit(x, est3(), seed=3, n_init=3, max_iter=30, progress=False)
    finals = [r.final_log_likelihood for r in singles]
    assert best.start_log_likelihoods == finals
    assert best.final_log_likelihood == max(finals) and best.seed == 3 + int(np.argmax(finals))
    assert best.model == singles[int(np.argmax(finals))].model


def test_n_init_runs_every_start_on_one_opened_handle():
    from mixfold.dispatch import open_backend

    x = mixture_data(3000)
    handle, bound, _ = open_backend("local", x, est3())
    with handle:  # a handle passed in stays open: the starts share its resident rows
        res = mixfold.fit(handle, bound, seed=3, n_init=3, max_iter=30, progress=False)
        again = mixfold.fit(handle, bound, seed=3, n_init=3, max_iter=30, progress=False)
    direct = mixfold.fit(x, est3(), seed=3, n_init=3, max_iter=30, progress=False)
    assert res.start_log_likelihoods == again.start_log_likelihoods \
        == direct.start_log_likelihoods


def test_n_init_refuses_a_fixed_start():
    with pytest.raises(ValueError, match="n_init=2 runs several seeded starts: give one"):
        mixfold.fit([1.0, 2.0], GaussianEstimator(), n_init=2,
                    init=GaussianDistribution(0.0, 1.0), progress=False)
    with pytest.raises(ValueError, match="n_init must be an integer >= 1, got 0"):
        mixfold.fit([1.0, 2.0], GaussianEstimator(), n_init=0, progress=False)


def test_a_warning_during_the_bar_is_written_above_it(capsys):
    x = np.r_[np.zeros(50), np.ones(50)]  # a component loses its rows mid-fit
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        shown = warnings.showwarning
        mixfold.optimize(x, est3(), seed=0, progress=True, max_iter=20)
        assert warnings.showwarning is shown  # restored after the fit
    err = capsys.readouterr().err
    lines = [line for line in err.split("\n") if "DegenerateFitWarning" in line]
    # each warning on a line of its own, never glued to a bar's carriage-return update
    assert lines and all(line.split("\r")[-1].startswith(__file__) for line in lines)


@pytest.mark.slow
def test_n_init_on_spark_equals_local():
    x = mixture_data(2000)
    local = mixfold.fit(x, est3(), seed=3, n_init=2, max_iter=20, progress=False)
    spark = mixfold.fit(x, est3(), seed=3, n_init=2, max_iter=20, progress=False,
                        backend="spark")
    np.testing.assert_allclose(spark.start_log_likelihoods, local.start_log_likelihoods,
                               rtol=1e-10)
    assert spark.seed == local.seed


# --- tables are rows; a start of another structure is named, not a crash

@pytest.mark.parametrize("component", [mixfold.DiagonalGaussianEstimator,
                                       mixfold.MultivariateGaussianEstimator])
def test_a_numeric_table_fits_as_its_array(component):
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    from sklearn.datasets import load_iris

    frame = load_iris(as_frame=True).data
    est = MixtureEstimator([component()] * 3)
    by_array = mixfold.optimize(frame.to_numpy(), est, seed=1, progress=False)
    for table in (frame, pd.DataFrame(frame.to_numpy()), pa.Table.from_pandas(frame)):
        model = mixfold.optimize(table, est, seed=1, progress=False)
        assert model == by_array
        assert model.fit_result.log_likelihood == by_array.fit_result.log_likelihood


def test_a_start_of_another_structure_is_named():
    x = mixture_data(500)
    two = mixfold.optimize(x, MixtureEstimator([GaussianEstimator()] * 2), progress=False)
    with pytest.raises(ValueError, match=r"^init does not have the structure of the model being "
                                         r"fitted: at model\['weights'\]: 2 items, the fitted "
                                         r"model has 3$"):
        mixfold.optimize(x, est3(), init=two, progress=False)
    records = [{"a": v, "b": "x" if v > 0 else "y"} for v in x[:50]]
    start = mixfold.optimize(records, RecordEstimator({"a": GaussianEstimator(),
                                                       "b": CategoricalEstimator()}),
                             progress=False)
    with pytest.raises(ValueError, match=r"fields \['a', 'b'\], the fitted model's are \['a'\]"):
        mixfold.optimize(records, RecordEstimator({"a": GaussianEstimator()}), init=start,
                         progress=False)
