"""The plots draw what they are given: the trace's points, one bar per span, a point per row."""

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import mixfold  # noqa: E402
from mixfold.plots import plot_clusters, plot_log_likelihood, plot_plan_timeline  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def two_blobs():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 1, (300, 2)), rng.normal(6, 1, (300, 2))])
    model = mixfold.optimize(X, mixfold.MixtureEstimator(
        [mixfold.MultivariateGaussianEstimator()] * 2), seed=0, progress=False)
    return X, model


def test_log_likelihood_trace_plots_every_iteration(two_blobs):
    _, model = two_blobs
    ax = plot_log_likelihood(model)
    x, y = ax.lines[0].get_data()
    np.testing.assert_array_equal(y, model.fit_result.log_likelihood)
    np.testing.assert_array_equal(x, np.arange(len(y)))
    assert "converged" in ax.get_title()
    ax2 = plot_log_likelihood([-3.0, -2.5, -2.4])
    np.testing.assert_array_equal(ax2.lines[0].get_data()[1], [-3.0, -2.5, -2.4])
    with pytest.raises(ValueError, match="non-empty log-likelihood trace"):
        plot_log_likelihood([])


def test_clusters_colour_rows_by_component(two_blobs):
    X, model = two_blobs
    fig, ax = plt.subplots()
    assert plot_clusters(X, model, ax=ax) is ax
    # one scatter per component (a legend entry each): each holds one blob
    blobs = sorted((np.asarray(c.get_offsets()) for c in ax.collections), key=lambda p: p[0, 0])
    np.testing.assert_array_equal(blobs[0], X[:300])
    np.testing.assert_array_equal(blobs[1], X[300:])
    assert len(ax.patches) == 2  # one covariance ellipse per component
    centres = sorted(tuple(np.round(p.center)) for p in ax.patches)
    assert centres == [(0.0, 0.0), (6.0, 6.0)]
    with pytest.raises(ValueError, match=r"expected shape \(n_rows, 2\)"):
        plot_clusters(np.zeros((5, 3)), model)


def test_plan_timeline_draws_one_bar_per_span():
    spans = [("cpu:0", 0.0, 2.0), ("gpu:0", 0.5, 1.5), ("cpu:0", 2.0, 3.0)]
    ax = plot_plan_timeline(spans)
    bars = [(p.get_y() + p.get_height() / 2, p.get_x(), p.get_x() + p.get_width())
            for p in ax.patches]
    assert bars == [(0.0, 0.0, 2.0), (1.0, 0.5, 1.5), (0.0, 2.0, 3.0)]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["cpu:0", "gpu:0"]
    with pytest.raises(ValueError, match="expected finite start <= finish"):
        plot_plan_timeline([("cpu:0", 2.0, 1.0)])


def test_plots_take_a_fitted_wrapper_and_label_their_axes():
    pytest.importorskip("sklearn")
    pd = pytest.importorskip("pandas")
    from mixfold.sklearn import GaussianMixture

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(np.vstack([rng.normal(0, 1, (200, 2)), rng.normal(6, 1, (200, 2))]),
                         columns=["height", "width"])
    gm = GaussianMixture(2, random_state=0).fit(frame.to_numpy())
    ax = plot_log_likelihood(gm)
    np.testing.assert_array_equal(ax.lines[0].get_data()[1], gm.log_likelihood_trace_)
    ax = plot_clusters(frame, gm)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("height", "width")
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [f"component {k} (weight {w:.2f})" for k, w in enumerate(gm.weights_)]


def test_model_selection_plot_marks_the_lowest_bic():
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_iris

    from mixfold.plots import plot_model_selection
    from mixfold.sklearn import GaussianMixture, select_n_components

    X = load_iris().data
    selection = select_n_components(X, [1, 2, 3], GaussianMixture(random_state=0))
    ax = plot_model_selection(selection)
    np.testing.assert_allclose(ax.lines[0].get_data()[1], selection.bic)
    np.testing.assert_allclose(ax.lines[1].get_data()[1], selection.aic)
    assert ax.get_title() == f"lowest BIC at {selection.best_n_components} components"


def test_finish_times_plot_has_whole_worker_ticks():
    from mixfold.parallel.heterogeneous import Worker, plan_heterogeneous
    from mixfold.parallel.simulation import plot_finish_times, simulate_plan

    plan = plan_heterogeneous([Worker("a"), Worker("b"), Worker("c")], 1000)
    ax = plot_finish_times(simulate_plan(plan))
    ax.figure.canvas.draw()
    ticks = ax.get_xticks()
    assert np.array_equal(ticks, np.round(ticks))


def test_a_model_read_from_a_file_has_no_trace_to_plot(two_blobs, tmp_path):
    _, model = two_blobs
    loaded = mixfold.load(mixfold.save(model, tmp_path / "m.json"))
    with pytest.raises(ValueError, match="this model carries no fit history"):
        plot_log_likelihood(loaded)
    assert len(plot_log_likelihood(model).lines[0].get_xdata()) == len(
        model.fit_result.log_likelihood)
