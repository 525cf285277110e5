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
    points = ax.collections[0]
    np.testing.assert_array_equal(points.get_offsets(), X)
    labels = np.asarray(points.get_array())
    assert len(set(labels[:300])) == 1 and len(set(labels[300:])) == 1
    assert labels[0] != labels[-1]
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
