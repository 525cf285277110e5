"""Plots where a person would rather look (matplotlib, the ``plot`` extra; imported on first use).

- :func:`plot_log_likelihood`: the mean log-likelihood per EM iteration of a fit;
- :func:`plot_clusters`: 2-D rows coloured by their most probable component, with the
  components' means (and covariance ellipses for Gaussian components);
- :func:`plot_plan_timeline`: one bar per worker from its start to its finish time (plain
  ``(name, start, finish)`` triples, so any plan or measured run can be drawn);
- :func:`plot_model_selection`: BIC and AIC against the number of components
  (:func:`mixfold.sklearn.select_n_components`, or FitResults per K).

Each function draws on ``ax`` when given (else on a new figure) and returns the Axes. Where a
model is expected, a fitted scikit-learn wrapper of :mod:`mixfold.sklearn` does as well.

>>> import matplotlib; matplotlib.use("Agg")
>>> ax = plot_plan_timeline([("cpu:0", 0.0, 1.5), ("cpu:1", 0.0, 1.2), ("gpu:0", 0.1, 1.4)])
>>> [t.get_text() for t in ax.get_yticklabels()]
['cpu:0', 'cpu:1', 'gpu:0']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.families._protocol import Distribution

__all__ = ["plot_log_likelihood", "plot_clusters", "plot_plan_timeline", "plot_model_selection"]


def _model(fitted: Any) -> Any:
    """The mixfold model of a fitted scikit-learn wrapper (its ``model_``), else ``fitted``."""
    model = getattr(fitted, "model_", None)
    return fitted if model is None or isinstance(fitted, Distribution) else model


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError("mixfold.plots needs matplotlib: pip install \"mixfold[plot]\"") \
            from err
    return plt.figure().add_subplot()


def plot_log_likelihood(fit: Any, ax: Any = None) -> Any:
    """Draw the mean log-likelihood per row after each EM iteration.

    Parameters
    ----------
    fit : FitResult, Distribution, fitted wrapper or sequence of float
        A :class:`~mixfold.FitResult`, a fitted model (its ``fit_result``), a fitted wrapper
        of :mod:`mixfold.sklearn`, or the values themselves.
    ax : matplotlib Axes, default=None
        Where to draw; None: a new figure.

    Returns
    -------
    ax : matplotlib Axes

    Raises
    ------
    ValueError
        The trace is empty or not one-dimensional.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> ax = plot_log_likelihood([-3.2, -2.9, -2.85, -2.849])
    >>> ax.get_xlabel()
    'EM iteration'
    """
    result = getattr(_model(fit), "fit_result", fit)
    if isinstance(result, Distribution):
        raise ValueError("this model carries no fit history (a model read from a file keeps its "
                         "parameters only): pass the model optimize returned, its fit_result, "
                         "or the wrapper that fitted it")
    trace = np.asarray(getattr(result, "log_likelihood", result), dtype=np.float64)
    if trace.ndim != 1 or trace.size == 0:
        raise ValueError(f"expected a non-empty log-likelihood trace, got shape {trace.shape}")
    ax = _axes(ax)
    ax.plot(np.arange(trace.size), trace, marker="o", markersize=3)
    ax.set_xlabel("EM iteration")
    ax.set_ylabel("mean log-likelihood per row")
    stop = getattr(result, "stop_reason", None)
    ax.set_title("log-likelihood trace" + (f" ({stop})" if stop else ""))
    return ax


def plot_clusters(X: Any, model: Distribution, ax: Any = None) -> Any:
    """Draw 2-D rows coloured by their most probable component of a fitted mixture.

    Component means are drawn as crosses, the 2-sigma ellipse of each Gaussian component (full
    or diagonal covariance) around them, and a legend gives the components' weights.

    Parameters
    ----------
    X : array-like of shape (n_rows, 2) or DataFrame of two columns
        The rows; a DataFrame's column names label the axes.
    model : MixtureDistribution or fitted wrapper
        The fitted mixture (or a fitted wrapper of :mod:`mixfold.sklearn`).
    ax : matplotlib Axes, default=None
        Where to draw; None: a new figure.

    Returns
    -------
    ax : matplotlib Axes

    Raises
    ------
    ValueError
        ``X`` is not of shape (n_rows, 2).
    TypeError
        ``model`` is not a fitted mixture.
    """
    names = [str(c) for c in getattr(X, "columns", ["x0", "x1"])]
    model = _model(model)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != 2:
        raise ValueError(f"plot_clusters draws 2-D rows: expected shape (n_rows, 2), got "
                         f"{X.shape}")
    if not hasattr(model, "seq_posterior") or not hasattr(model, "components"):
        raise TypeError(f"expected a fitted mixture, got a {type(model).__name__}")
    labels = model.seq_posterior(model.encoder().encode(X)).argmax(axis=1)
    ax = _axes(ax)
    for k in range(len(model.components)):  # one scatter per component: a legend entry each
        at = labels == k
        ax.scatter(X[at, 0], X[at, 1], color=f"C{k % 10}", s=8, alpha=0.6,
                   label=f"component {k} (weight {model.weights[k]:.2f})")
    from matplotlib.patches import Ellipse

    for k, comp in enumerate(model.components):
        mu = np.asarray(getattr(comp, "mu", np.full(2, np.nan)), dtype=np.float64)
        if mu.shape != (2,):
            continue
        cov = getattr(comp, "cov", None)
        if cov is None and hasattr(comp, "sigma2"):
            cov = np.diag(comp.sigma2)
        ax.plot(*mu, marker="x", color="black", markersize=10)
        if cov is not None:
            values, vectors = np.linalg.eigh(np.asarray(cov))
            angle = np.degrees(np.arctan2(vectors[1, -1], vectors[0, -1]))
            width, height = 4 * np.sqrt(np.maximum(values[::-1], 0.0))
            ax.add_patch(Ellipse(mu, width, height, angle=angle, fill=False,
                                 color=f"C{k % 10}", linewidth=1.5))
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1] if len(names) > 1 else "x1")
    ax.legend(loc="best", fontsize="small")
    ax.set_title(f"{len(model.components)} components")
    return ax


def plot_plan_timeline(spans: Sequence[tuple[str, float, float]], ax: Any = None) -> Any:
    """Draw one horizontal bar per worker from its start to its finish time, workers in order.

    Parameters
    ----------
    spans : sequence of (str, float, float)
        ``(worker name, start, finish)`` triples in seconds; a worker may appear more than
        once (several tasks), each span drawn on its row.
    ax : matplotlib Axes, default=None
        Where to draw; None: a new figure.

    Returns
    -------
    ax : matplotlib Axes

    Raises
    ------
    ValueError
        No spans, a span that is not a triple, or one whose finish is before its start.
    """
    rows: list[str] = []
    bars: list[tuple[int, float, float]] = []
    for i, span in enumerate(spans):
        try:
            name, start, finish = span
            start, finish = float(start), float(finish)
        except (TypeError, ValueError):
            raise ValueError(f"span {i}: expected (name, start, finish), got {span!r}") from None
        if not (np.isfinite(start) and np.isfinite(finish) and finish >= start):
            raise ValueError(f"span {i} ({name!r}): expected finite start <= finish, got "
                             f"{start!r}, {finish!r}")
        if name not in rows:
            rows.append(str(name))
        bars.append((rows.index(str(name)), start, finish))
    if not bars:
        raise ValueError("no spans to draw")
    ax = _axes(ax)
    for row, start, finish in bars:
        ax.barh(row, finish - start, left=start, height=0.6, color=f"C{row % 10}")
    ax.set_yticks(range(len(rows)), rows)
    ax.invert_yaxis()  # the first worker on top
    ax.set_xlabel("seconds")
    ax.set_title(f"plan per worker (finishes at {max(f for _, _, f in bars):.3g} s)")
    return ax


def plot_model_selection(selection: Any, ax: Any = None) -> Any:
    """Draw BIC and AIC (lower is better) against the number of components, the best BIC marked.

    Parameters
    ----------
    selection : ComponentSelection or dict of int to FitResult
        A :class:`mixfold.sklearn.ComponentSelection` (from
        :func:`mixfold.sklearn.select_n_components`), or a mapping n_components ->
        :class:`~mixfold.FitResult`.
    ax : matplotlib Axes, default=None
        Where to draw; None: a new figure.

    Returns
    -------
    ax : matplotlib Axes

    Raises
    ------
    ValueError
        No fits to draw.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import numpy as np, mixfold
    >>> x = np.random.default_rng(0).normal(size=300) + np.repeat([0, 5], 150)
    >>> fits = {k: mixfold.fit(x, mixfold.MixtureEstimator([mixfold.GaussianEstimator()] * k),
    ...                        progress=False) for k in (1, 2, 3)}
    >>> ax = plot_model_selection(fits)
    >>> ax.get_title()
    'lowest BIC at 2 components'
    """
    if isinstance(selection, dict):
        ks = sorted(selection)
        bic = [selection[k].bic for k in ks]
        aic = [selection[k].aic for k in ks]
    else:
        ks, bic, aic = list(selection.n_components), list(selection.bic), list(selection.aic)
    if not ks:
        raise ValueError("no fits to draw")
    ax = _axes(ax)
    ax.plot(ks, bic, marker="o", label="BIC")
    ax.plot(ks, aic, marker="s", label="AIC")
    best = ks[int(np.argmin(bic))]
    ax.axvline(best, color="k", linestyle=":", linewidth=1)
    ax.set_xticks(ks)
    ax.set_xlabel("number of components")
    ax.set_ylabel("criterion (lower is better)")
    ax.legend(loc="best")
    ax.set_title(f"lowest BIC at {best} components")
    return ax
