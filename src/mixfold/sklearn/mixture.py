"""scikit-learn-style mixtures: :class:`GaussianMixture` (scikit-learn's ``GaussianMixture``, its
parameters, attributes, stopping rule and error words), :class:`MixedTypeClustering` (clusters of
a DataFrame of mixed column types) and :func:`select_n_components` (BIC / AIC over K)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, DensityMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

import mixfold
from mixfold.errors import NumericalError, ParameterError
from mixfold.families import (DiagonalGaussianDistribution, Distribution, Encoder, Estimator,
                              MixtureDistribution, MixtureEstimator,
                              MultivariateGaussianDistribution)
from mixfold.families.composite import records_log_densities
from mixfold.io.readers import _is_arrow_table, _is_pandas_frame
from mixfold.io.tables import record_spec
from mixfold.options import Rule, integer, rule
from mixfold.sklearn._common import (_MIXTURE_RULES, _check_params, _gaussian, _is_nonneg,
                                     _seed, _workers)
from mixfold.spec import estimator_from_spec

__all__ = ["GaussianMixture", "MixedTypeClustering", "select_n_components",
           "ComponentSelection"]

COVARIANCE_TYPES = ("full", "diag", "tied", "spherical")
INIT_PARAMS = ("kmeans", "k-means++", "random", "random_from_data")
#: What a value the fitted model cannot score does: raise, or count as missing (marginalised).
UNKNOWN_POLICIES = ("error", "missing")

#: scikit-learn's words when the best start ran out of ``max_iter``.
NOT_CONVERGED = ("Best performing initialization did not converge. Try different init "
                 "parameters, or increase max_iter, tol, or check for degenerate data.")
#: scikit-learn's words when, with ``reg_covar=0``, a component's covariance collapsed.
ILL_DEFINED_COVARIANCE = (
    "Fitting the mixture model failed because some components have ill-defined empirical "
    "covariance (for instance caused by singleton or collapsed samples). Try to decrease the "
    "number of components, increase reg_covar, or scale the input data.")


def _gaussian_mixture_parameters(covariance_type: str, k: int, d: int) -> int:
    """scikit-learn's count of free parameters of a Gaussian mixture."""
    covariance = {"full": k * d * (d + 1) // 2, "diag": k * d, "tied": d * (d + 1) // 2,
                  "spherical": k}[covariance_type]
    return covariance + k * d + k - 1


class GaussianMixtureEstimator(MixtureEstimator):
    """A mixture of Gaussians whose covariances follow scikit-learn's ``covariance_type``
    (the components' own options: ``"tied"``, full-covariance components sharing one by a
    covariance key; ``"spherical"``, diagonal ones with one variance), counting its free
    parameters as scikit-learn does."""

    option_rules = {**MixtureEstimator.option_rules,
                    "covariance_type": rule(lambda v: v in COVARIANCE_TYPES,
                                            f"one of {list(COVARIANCE_TYPES)}")}

    def __init__(self, components: Sequence[Estimator], covariance_type: str = "full"):
        super().__init__(components)
        self.check_options(covariance_type=covariance_type)
        self.covariance_type = covariance_type

    def bind(self, encoder: Encoder) -> GaussianMixtureEstimator:
        return GaussianMixtureEstimator(super().bind(encoder).components, self.covariance_type)

    def n_parameters(self, model: Distribution) -> int:
        return _gaussian_mixture_parameters(self.covariance_type, model.num_components,
                                            model.components[0].mu.size)


def _covariances_from(resp: np.ndarray, X: np.ndarray, reg_covar: float,
                      covariance_type: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights, means, covariances) of the rows weighted by ``resp`` (n_samples, n_components),
    each covariance plus ``reg_covar`` on its diagonal, as scikit-learn's initialisation."""
    nk = resp.sum(axis=0) + 10 * np.finfo(resp.dtype).eps
    origin = X.mean(axis=0)  # moments about the data's mean: nothing cancels far from 0
    X = X - origin
    means = resp.T @ X / nk[:, None]
    d = X.shape[1]
    if covariance_type == "full":
        cov = np.empty((len(nk), d, d))
        for k in range(len(nk)):  # one (n, d) product per component
            diff = X - means[k]
            cov[k] = (resp[:, k] * diff.T) @ diff / nk[k] + reg_covar * np.eye(d)
    elif covariance_type == "tied":
        cov = (X.T @ X - (nk * means.T) @ means) / nk.sum() + reg_covar * np.eye(d)
    else:
        cov = resp.T @ (X * X) / nk[:, None] - means ** 2 + reg_covar
        if covariance_type == "spherical":
            cov = cov.mean(axis=1)
    return nk / X.shape[0], means + origin, cov


def _precisions(covariances: np.ndarray, covariance_type: str) -> np.ndarray:
    return np.linalg.inv(covariances) if covariance_type in ("full", "tied") else 1 / covariances


def _precisions_cholesky(model: MixtureDistribution, covariance_type: str) -> np.ndarray:
    """scikit-learn's ``precisions_cholesky_`` of a fitted ``model``: for a covariance
    C = L L^T, the upper triangular inverse U = (L^-1)^T (precision = U U^T), which each full
    component holds already (a tied mixture's components share one); 1 / sqrt(C) for
    variances."""
    if covariance_type == "full":
        return np.array([c.precision_cholesky for c in model.components])
    if covariance_type == "tied":
        return model.components[0].precision_cholesky.copy()
    return 1 / np.sqrt(np.array([c.sigma2 if covariance_type == "diag" else c.sigma2[0]
                                 for c in model.components]))


def _fit_input(est: Any, X: Any) -> tuple[bool, np.dtype, np.ndarray]:
    """A mixture wrapper's ``fit`` input, checked as scikit-learn checks it (its options, at
    least two rows and ``n_components``, float64 or float32): (whether the fit warm-starts, the
    dtype the parameters are given back in, the rows in float64)."""
    _check_params(est, est._rules())
    warm = est.warm_start and hasattr(est, "model_")
    X = validate_data(est, X, dtype=[np.float64, np.float32], ensure_min_samples=2,
                      reset=not warm)
    dtype, X = X.dtype, X.astype(np.float64, copy=False)
    if X.shape[0] < est.n_components:
        raise ValueError(f"Expected n_samples >= n_components but got n_components = "
                         f"{est.n_components}, n_samples = {X.shape[0]}")
    return warm, dtype, X


# the options both Gaussian mixtures take (GaussianMixture, BayesianGaussianMixture)
_GAUSSIAN_MIXTURE_RULES: dict[str, Rule] = {
    "n_components": integer(1),
    "covariance_type": rule(lambda v: v in COVARIANCE_TYPES, f"one of {list(COVARIANCE_TYPES)}"),
    "init_params": rule(lambda v: v in INIT_PARAMS, f"one of {list(INIT_PARAMS)}"),
    "reg_covar": rule(_is_nonneg, "a finite number >= 0"),
    "verbose": integer(0),
    "verbose_interval": integer(1),
    "warm_start": rule(lambda v: isinstance(v, (bool, np.bool_)), "True or False"),
    **_MIXTURE_RULES}


def _shaped(value: Any, shape: tuple[int, ...], name: str) -> np.ndarray:
    """A given start parameter as a float64 array of ``shape`` (scikit-learn's error else)."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != shape:
        raise ValueError(f"The parameter '{name}' should have the shape of {shape}, but got "
                         f"{arr.shape}")
    return arr


def _check_precisions(precisions: np.ndarray, covariance_type: str) -> None:
    """scikit-learn's checks of ``precisions_init``: positive variances' inverses, or
    symmetric positive-definite matrices."""
    if covariance_type in ("diag", "spherical"):
        if np.any(precisions <= 0):
            raise ValueError(f"'{covariance_type} precision' should be positive")
        return
    # np.allclose's test (atol 1e-8, rtol 1e-5) against the transposes, the whole stack at once
    stack = precisions.reshape(-1, *precisions.shape[-2:])
    flipped = stack.transpose(0, 2, 1)
    if not (np.all(np.abs(stack - flipped) <= 1e-8 + 1e-5 * np.abs(flipped))
            and np.all(np.linalg.eigvalsh(stack) > 0)):
        raise ValueError(f"'{covariance_type} precision' should be symmetric, "
                         f"positive-definite")


class _MixtureMethods:
    """predict / predict_proba / score_samples / score / bic / aic over a fitted ``model_``."""

    model_: Any

    def _encoded(self, X: Any) -> Any:
        raise NotImplementedError

    def _callbacks(self) -> list[Callable[[Any], Any]]:
        return []

    def _core_tol(self) -> float:
        """The ``tol`` of mixfold's own stopping rule (relative change of the mean
        log-likelihood); a wrapper with another rule stops the fit from a callback."""
        return self.tol

    def _fit_model(self, X: Any, estimator: Estimator,
                   init: Distribution | list[Distribution] | None = None) -> Distribution:
        """The best of ``n_init`` starts (given in ``init``, else seeds seed, seed + 1, ...), by
        final mean log-likelihood, all in mixfold's one EM loop over one encoding of ``X``."""
        result = mixfold.fit(X, estimator, max_iter=self.max_iter, tol=self._core_tol(),
                             seed=_seed(self.random_state), init=init,
                             n_init=self.n_init if init is None else 1, backend=self.backend,
                             num_workers=_workers(self), precision=self.precision,
                             progress=False, callbacks=self._callbacks())
        model = result.model
        model.fit_result = result
        self.model_ = model
        self.weights_ = model.weights.copy()
        self.converged_ = result.converged
        self.n_iter_ = result.iterations
        self.lower_bound_ = result.final_log_likelihood if result.log_likelihood else -np.inf
        self.log_likelihood_trace_ = np.asarray(result.log_likelihood)
        return model

    def predict_proba(self, X: Any) -> np.ndarray:
        """Posterior probability of each component, array of shape (n_samples, n_components)."""
        check_is_fitted(self)
        return self.model_.seq_posterior(self._encoded(X))

    def predict(self, X: Any) -> np.ndarray:
        """The most probable component of each row, int array of shape (n_samples,)."""
        return self.predict_proba(X).argmax(axis=1)

    def fit_predict(self, X: Any, y: Any = None) -> np.ndarray:
        """Fit, then the component of each row of ``X``."""
        return self.fit(X).predict(X)

    def score_samples(self, X: Any) -> np.ndarray:
        """Log-density of each row, array of shape (n_samples,)."""
        check_is_fitted(self)
        return self.model_.seq_log_density(self._encoded(X))

    def score(self, X: Any, y: Any = None) -> float:
        """Mean log-density of the rows of ``X``."""
        return float(self.score_samples(X).mean())

    def _n_parameters(self) -> int:
        return self.model_.fit_result.n_parameters

    def bic(self, X: Any) -> float:
        """Bayesian information criterion on ``X`` (lower is better), as scikit-learn's:
        ``-2 * total log-likelihood + n_parameters * log(n_samples)``."""
        scores = self.score_samples(X)
        return float(-2 * scores.sum() + self._n_parameters() * np.log(len(scores)))

    def aic(self, X: Any) -> float:
        """Akaike information criterion on ``X``: ``-2 * total log-likelihood + 2 *
        n_parameters`` (lower is better)."""
        return float(-2 * self.score_samples(X).sum() + 2 * self._n_parameters())


class GaussianMixture(_MixtureMethods, DensityMixin, BaseEstimator):
    """A mixture of ``n_components`` Gaussians, scikit-learn's ``GaussianMixture`` fitted by
    mixfold's EM.

    Parameters as in scikit-learn: ``covariance_type`` (``"full"``, ``"diag"``, ``"tied"``,
    ``"spherical"``), ``reg_covar`` (added to the covariance diagonals), ``init_params``
    (``"kmeans"``: a full k-means, scikit-learn's default; ``"k-means++"``, ``"random"``,
    ``"random_from_data"``), ``weights_init`` / ``means_init`` / ``precisions_init``,
    ``n_init`` (the best start kept), ``warm_start`` (a refit starts from the last fit),
    ``verbose`` / ``verbose_interval``, ``random_state`` (None means the fixed seed 0, so fits
    repeat). ``tol`` (1e-3) and ``max_iter`` as scikit-learn's: the fit stops when the mean
    log-likelihood per row changes by less than ``tol`` (absolute), a warm start comparing with
    the last fit's, and warns a ``ConvergenceWarning`` when ``max_iter`` (0: the start itself)
    runs out first; mixfold's core API keeps its own relative ``tol``. Plus
    mixfold's ``backend``, ``num_workers`` (``n_workers``, its old name) and ``precision``
    of the E-step. Fitted (in float32 for float32 input):
    ``weights_``, ``means_``, ``covariances_``, ``precisions_``, ``precisions_cholesky_``,
    ``converged_``, ``n_iter_``, ``lower_bound_`` (mean log-likelihood per row),
    ``lower_bounds_`` (one per iteration), ``log_likelihood_trace_`` and the mixfold
    model ``model_``; ``bic(X)`` / ``aic(X)`` as scikit-learn's.

    >>> import numpy as np
    >>> X = np.random.default_rng(1).normal(size=(500, 3))
    >>> gm = GaussianMixture(1, covariance_type="diag").fit(X)
    >>> gm.covariances_.shape, round(gm.score(X), 1), round(gm.bic(X))
    ((1, 3), -4.3, 4312)
    """

    def __init__(self, n_components: int = 1, *, covariance_type: str = "full",
                 tol: float = 1e-3, reg_covar: float = 1e-6, max_iter: int = 100,
                 n_init: int = 1, init_params: str = "kmeans", weights_init: Any = None,
                 means_init: Any = None, precisions_init: Any = None, random_state: Any = None,
                 warm_start: bool = False, verbose: int = 0, verbose_interval: int = 10,
                 backend: Any = "local", num_workers: int | None = None,
                 precision: str = "float64", n_workers: int | None = None):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.tol = tol
        self.reg_covar = reg_covar
        self.max_iter = max_iter
        self.n_init = n_init
        self.init_params = init_params
        self.weights_init = weights_init
        self.means_init = means_init
        self.precisions_init = precisions_init
        self.random_state = random_state
        self.warm_start = warm_start
        self.verbose = verbose
        self.verbose_interval = verbose_interval
        self.backend = backend
        self.num_workers = num_workers
        self.n_workers = n_workers
        self.precision = precision

    def _rules(self) -> dict[str, Rule]:
        return _GAUSSIAN_MIXTURE_RULES

    def _start_responsibilities(self, X: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
        """The start's responsibilities, shape (n_samples, n_components), as scikit-learn's."""
        from sklearn.cluster import KMeans, kmeans_plusplus

        n, k = X.shape[0], self.n_components
        resp = np.zeros((n, k))
        if self.init_params == "kmeans":
            labels = KMeans(n_clusters=k, n_init=1, random_state=rng).fit(X).labels_
            resp[np.arange(n), labels] = 1
        elif self.init_params == "random":
            resp = rng.uniform(size=(n, k))
            resp /= resp.sum(axis=1)[:, None]
        else:  # one data row per component: k-means++'s seeds or a plain draw
            at = (kmeans_plusplus(X, k, random_state=rng)[1] if self.init_params == "k-means++"
                  else rng.choice(n, size=k, replace=False))
            resp[at, np.arange(k)] = 1
        return resp

    def _given_start(self, d: int) -> dict[str, np.ndarray]:
        """``weights_init`` / ``means_init`` / ``precisions_init`` as arrays, checked as
        scikit-learn checks them (and worded as it words it)."""
        k, kind = self.n_components, self.covariance_type
        given = {}
        if self.weights_init is not None:
            weights = _shaped(self.weights_init, (k,), "weights")
            if weights.min() < 0 or weights.max() > 1:
                raise ValueError(f"The parameter 'weights' should be in the range [0, 1], but "
                                 f"got max value {weights.min():.5f}, min value "
                                 f"{weights.max():.5f}")  # scikit-learn's words, swapped too
            if not abs(weights.sum() - 1.0) <= 1e-6:  # (a NaN sum fails too)
                raise ValueError(f"The parameter 'weights' should be normalized, but got "
                                 f"sum(weights) = {weights.sum():.5f}")
            given["weights"] = weights
        if self.means_init is not None:
            given["means"] = _shaped(self.means_init, (k, d), "means")
        if self.precisions_init is not None:
            shape = {"full": (k, d, d), "tied": (d, d), "diag": (k, d), "spherical": (k,)}[kind]
            precisions = _shaped(self.precisions_init, shape, f"{kind} precision")
            _check_precisions(precisions, kind)
            given["precisions"] = precisions
        return given

    def _start(self, X: np.ndarray, rng: np.random.RandomState | None,
               given: Mapping[str, np.ndarray]) -> MixtureDistribution:
        """One starting model: parameters from the start's responsibilities, then the given
        ``weights_init`` / ``means_init`` / ``precisions_init`` in their place (all three
        given: no responsibilities, no k-means, as scikit-learn; ``rng`` may be ``None``)."""
        d, kind = X.shape[1], self.covariance_type
        if len(given) == 3:
            weights, means = given["weights"], given["means"]
        else:
            weights, means, cov = _covariances_from(self._start_responsibilities(X, rng), X,
                                                    self.reg_covar, kind)
            weights = given.get("weights", weights)
            means = given.get("means", means)
        if "precisions" in given:
            cov = _precisions(given["precisions"], kind)
        if kind == "full":
            comps = [MultivariateGaussianDistribution(m, c) for m, c in zip(means, cov)]
        elif kind == "tied":
            comps = MultivariateGaussianDistribution.tied(means, cov)
        else:
            var = cov if kind == "diag" else np.repeat(cov[:, None], d, axis=1)
            comps = [DiagonalGaussianDistribution(m, v) for m, v in zip(means, var)]
        return MixtureDistribution(comps, weights / weights.sum())

    def _core_tol(self) -> float:
        return 0.0  # scikit-learn's rule, in _callbacks, stops the fit

    def _callbacks(self) -> list[Callable[[Any], Any]]:
        return [self._sklearn_tol()] + ([self._report()] if self.verbose >= 2 else [])

    def _sklearn_tol(self) -> Callable[[Any], bool]:
        """scikit-learn's stopping rule: the lower bound (mean log-likelihood per row) changed
        by less than ``tol`` in absolute value; a warm start compares its first iteration with
        the last fit's lower bound, so convergence carries across ``fit`` calls."""
        carried = self.lower_bound_ if self.warm_start and hasattr(self, "model_") else -np.inf
        last = [carried]

        def converged(info: Any) -> bool:
            if info.iteration == 0:  # a new start
                last[0] = carried
            change, last[0] = info.log_likelihood - last[0], info.log_likelihood
            return abs(change) < self.tol

        return converged

    def _report(self) -> Callable[[Any], None]:
        last = [time.perf_counter()]

        def report(info: Any) -> None:
            if (info.iteration + 1) % self.verbose_interval == 0:
                now = time.perf_counter()
                print(f"  Iteration {info.iteration + 1}\t time lapse {now - last[0]:.5f}s\t "
                      f"ll change {info.delta:.5f}")
                last[0] = now

        return report

    def fit(self, X: Any, y: Any = None) -> GaussianMixture:
        """Fit to ``X``, array of shape (n_samples, n_features); ``y`` is ignored. float32
        input gives float32 parameters (EM itself runs in float64)."""
        warm, dtype, X = _fit_input(self, X)
        estimator = GaussianMixtureEstimator(
            [_gaussian(self.covariance_type, self.reg_covar)] * self.n_components,
            self.covariance_type)
        try:
            if warm:
                init: Any = self.model_
            else:
                given = self._given_start(X.shape[1])
                # a start given whole draws nothing: no generator to seed (a tenth of a ms)
                rng = None if len(given) == 3 else \
                    check_random_state(0 if self.random_state is None else self.random_state)
                init = [self._start(X, rng, given) for _ in range(self.n_init)]
            model = self._fit_model(X, estimator, init)
        except (ParameterError, NumericalError) as err:  # a covariance no floor kept definite
            raise ValueError(ILL_DEFINED_COVARIANCE) from err
        result = model.fit_result
        trace = result.log_likelihood
        self.converged_ = result.stop_reason in ("callback", "converged") or (
            result.stop_reason == "decrease" and abs(trace[-1] - trace[-2]) < self.tol)
        self.lower_bounds_ = list(trace)
        if self.verbose:
            print(f"Initialization {'converged' if self.converged_ else 'did not converge'}.")
        if not self.converged_ and self.max_iter > 0:
            warnings.warn(NOT_CONVERGED, ConvergenceWarning, stacklevel=2)
        self._set_fitted(model, dtype)
        return self

    def _set_fitted(self, model: MixtureDistribution, dtype: np.dtype) -> None:
        """scikit-learn's fitted attributes of ``model``, in the input's float ``dtype``."""
        kind = self.covariance_type
        if kind == "full":
            cov = np.array([c.cov for c in model.components])
        elif kind == "tied":
            cov = model.components[0].cov.copy()
        elif kind == "diag":
            cov = np.array([c.sigma2 for c in model.components])
        else:
            cov = np.array([c.sigma2[0] for c in model.components])
        self.weights_ = model.weights.astype(dtype)
        self.means_ = np.array([c.mu for c in model.components]).astype(dtype)
        self.covariances_ = cov.astype(dtype)
        chol = _precisions_cholesky(model, kind)
        # U U^T as scikit-learn forms its precisions from the same factor
        self.precisions_ = (chol @ np.swapaxes(chol, -1, -2) if kind in ("full", "tied") else
                            chol ** 2).astype(dtype)
        self.precisions_cholesky_ = chol.astype(dtype)

    def _n_parameters(self) -> int:
        return _gaussian_mixture_parameters(self.covariance_type, self.n_components,
                                            self.means_.shape[1])

    def _encoded(self, X: Any) -> Any:
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self.model_.encoder().encode(X)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Posterior probability of each component, array of shape (n_samples, n_components),
        in the fitted parameters' float dtype."""
        return super().predict_proba(X).astype(self.means_.dtype, copy=False)

    def score_samples(self, X: Any) -> np.ndarray:
        """Log-density of each row, shape (n_samples,), in the fitted parameters' dtype."""
        return super().score_samples(X).astype(self.means_.dtype, copy=False)

    def sample(self, n_samples: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """``n_samples`` rows drawn from the fitted mixture and their components, drawn as
        scikit-learn draws them (the same rows for the same parameters and ``random_state``):
        (X of shape (n_samples, n_features), y of shape (n_samples,)), sorted by component.
        """
        check_is_fitted(self)
        if not integer(1).accepts(n_samples):
            raise ValueError(f"Invalid value for 'n_samples': {n_samples!r}: sampling needs an "
                             f"integer >= 1")
        rng = check_random_state(self.random_state)
        counts = rng.multinomial(n_samples, self.weights_)
        d = self.means_.shape[1]
        kind = self.covariance_type
        if kind in ("full", "tied"):
            covs = self.covariances_ if kind == "full" else [self.covariances_] * len(counts)
            parts = [rng.multivariate_normal(m, c, int(n))
                     for m, c, n in zip(self.means_, covs, counts)]
        else:
            parts = [m + rng.standard_normal(size=(int(n), d)) * np.sqrt(c)
                     for m, c, n in zip(self.means_, self.covariances_, counts)]
        labels = np.concatenate([np.full(int(n), k) for k, n in enumerate(counts)])
        return np.vstack(parts), labels


@dataclass
class ComponentSelection:
    """BIC and AIC of one fit per number of components (:func:`select_n_components`)."""

    n_components: list[int]
    bic: list[float]
    aic: list[float]
    estimators: list[Any]

    @property
    def best_n_components(self) -> int:
        """The number of components of the lowest BIC."""
        return self.n_components[int(np.argmin(self.bic))]

    @property
    def best_estimator(self) -> Any:
        """The fitted estimator of the lowest BIC."""
        return self.estimators[int(np.argmin(self.bic))]


def select_n_components(X: Any, n_components: Sequence[int], estimator: Any = None,
                        y: Any = None) -> ComponentSelection:
    """Fit ``estimator`` (default ``GaussianMixture()``; any wrapper of this module with
    ``n_components``) once per number of components and report each fit's BIC and AIC on ``X``
    (``mixfold.plots.plot_model_selection`` draws them).

    >>> from sklearn.datasets import load_iris
    >>> X = load_iris().data
    >>> sel = select_n_components(X, range(1, 5), GaussianMixture(random_state=0))
    >>> sel.best_n_components, [round(b) for b in sel.bic]
    (2, [830, 574, 581, 630])
    """
    from sklearn.base import clone

    template = GaussianMixture() if estimator is None else estimator
    fits = [clone(template).set_params(n_components=int(k)).fit(X) for k in n_components]
    return ComponentSelection([int(k) for k in n_components], [f.bic(X) for f in fits],
                              [f.aic(X) for f in fits], fits)


class MixedTypeClustering(_MixtureMethods, DensityMixin, BaseEstimator):
    """Clusters of a pandas DataFrame of mixed column types: a mixture of ``n_components``
    records (``n_clusters``, its old name, still accepted).

    Each column gets the family its type suggests (floats Gaussian, non-negative integers
    Poisson, text categorical, booleans Bernoulli, any column with missing values wrapped in
    Optional; :mod:`mixfold.io.tables`); ``families`` overrides some, column -> spec node
    (``{"income": "log_gaussian"}``). ``pseudo_count`` keeps empty clusters and unseen levels at a
    positive probability. Arrays and Arrow tables are read as DataFrames (array columns are
    named ``x0, x1, ...``). An integer column whose values are all distinct (an identifier) is
    left out with a warning, unless ``families`` names it. ``unknown``: what a value the fitted
    model cannot score does at predict / score time (a level never seen at fit, a NaN in a
    column that had none): ``"error"`` raises naming the row and column, ``"missing"`` leaves
    the field out of that row (marginalised, as a missing value). Fitted: ``spec_`` (the spec
    that was fitted), ``weights_``, ``columns_``, ``left_out_``, ``converged_``, ``n_iter_``,
    ``lower_bound_``, ``model_``.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": [21.0, 23, 22, 61, 64, 60],
    ...                    "plan": ["a", "a", "a", "b", "b", "b"]})
    >>> mtc = MixedTypeClustering(2, random_state=0).fit(df)
    >>> labels = mtc.predict(df); bool(labels[0] != labels[-1]) and len(set(labels[:3])) == 1
    True
    """

    def __init__(self, n_components: int = 2, *, families: Mapping[str, Any] | None = None,
                 pseudo_count: float = 1.0, tol: float = 1e-6, max_iter: int = 100,
                 n_init: int = 1, random_state: Any = None, backend: Any = "local",
                 num_workers: int | None = None, precision: str = "float64",
                 unknown: str = "error", n_clusters: int | None = None,
                 n_workers: int | None = None):
        self.n_components = n_components
        self.unknown = unknown
        self.n_clusters = n_clusters
        self.families = families
        self.pseudo_count = pseudo_count
        self.tol = tol
        self.max_iter = max_iter
        self.n_init = n_init
        self.random_state = random_state
        self.backend = backend
        self.num_workers = num_workers
        self.n_workers = n_workers
        self.precision = precision

    def _frame(self, X: Any, reset: bool) -> Any:
        """``X`` as a DataFrame (columns ``x0, x1, ...`` for an array), with scikit-learn's input
        checks; missing values (None, NaN) are allowed, they are what Optional fields model."""
        import pandas as pd

        if _is_arrow_table(X):
            X = X.to_pandas()
        if _is_pandas_frame(X):
            validate_data(self, X, reset=reset, skip_check_array=True)
            if len(X) == 0:
                raise ValueError("Found array with 0 sample(s) while a minimum of 1 is required.")
            return X.rename(columns=str)  # fields are named by text, as pd.DataFrame(array)'s 0, 1
        arr = validate_data(self, X, reset=reset, dtype=None, ensure_all_finite="allow-nan")
        frame = pd.DataFrame(arr, columns=[f"x{i}" for i in range(arr.shape[1])])
        return frame.infer_objects()  # an object array of numbers: numeric columns

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # a missing value is data: Optional fields model it
        tags.input_tags.string = True
        tags.input_tags.categorical = True
        return tags

    def fit(self, X: Any, y: Any = None) -> MixedTypeClustering:
        """Fit to the DataFrame ``X`` (one row per item); ``y`` is ignored."""
        _check_params(self, {"n_components": integer(1),
                             "n_clusters": rule(lambda v: v is None or integer(1).accepts(v),
                                            "None or an integer >= 1 (n_components' old name)"),
                             "pseudo_count": rule(_is_nonneg, "a finite number >= 0"),
                             "families": rule(lambda v: v is None or isinstance(v, Mapping),
                                          "None or a mapping column -> spec"),
                             "unknown": rule(lambda v: v in UNKNOWN_POLICIES,
                                         f"one of {list(UNKNOWN_POLICIES)}"),
                             **_MIXTURE_RULES})
        frame = self._frame(X, reset=True)
        k = self._k()
        if len(frame) < k:
            raise ValueError(f"Expected n_samples >= n_components but got n_components = "
                             f"{k}, n_samples = {len(frame)}")
        record = record_spec(frame, self.families)
        record["record"] = {name: node if name in (self.families or {}) else
                            _declared_levels_kept(node, float(self.pseudo_count))
                            for name, node in record["record"].items()}
        self.left_out_ = [str(c) for c in frame.columns if str(c) not in record["record"]]
        if self.left_out_:
            warnings.warn(f"MixedTypeClustering: columns {self.left_out_} look like identifiers "
                          f"(distinct integers) and are left out; name them in families= to "
                          f"model them", UserWarning, stacklevel=2)
        spec = {"mixture": record, "k": k,
                "pseudo_count": float(self.pseudo_count)}
        estimator = estimator_from_spec(spec)
        self.columns_ = list(record["record"])
        self.dtypes_ = {str(c): frame[c].dtype for c in frame.columns
                        if str(c) in record["record"]}
        self.spec_ = spec
        self._fit_model(frame, estimator)
        return self

    def _encoded(self, X: Any) -> Any:
        check_is_fitted(self)
        return self.model_.encoder().encode(self._frame(X, reset=False))

    def _component_log_densities(self, X: Any) -> np.ndarray:
        """log w_k + log p_k(row), shape (n_samples, n_components), each field value the model
        cannot score left out of its row (marginalised)."""
        check_is_fitted(self)
        frame = self._frame(X, reset=False)
        with np.errstate(divide="ignore"):
            log_weights = np.log(self.model_.weights)
        return log_weights + records_log_densities(self.model_.components, frame)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Posterior probability of each cluster, array of shape (n_samples, n_components);
        with ``unknown="missing"``, values the model cannot score are left out of their row."""
        if self.unknown == "error":
            return super().predict_proba(X)
        scores = self._component_log_densities(X)
        top = scores.max(axis=1, keepdims=True)
        post = np.exp(scores - top)
        return post / post.sum(axis=1, keepdims=True)

    def score_samples(self, X: Any) -> np.ndarray:
        """Log-density of each row, shape (n_samples,); with ``unknown="missing"`` the fields
        the model cannot score are marginalised out of their row."""
        if self.unknown == "error":
            return super().score_samples(X)
        scores = self._component_log_densities(X)
        top = scores.max(axis=1)
        return top + np.log(np.exp(scores - top[:, None]).sum(axis=1))

    def sample(self, n_samples: int = 1) -> tuple[Any, np.ndarray]:
        """``n_samples`` rows drawn from the fitted model as a DataFrame with the fitted frame's
        column types (a missing value where a type has none becomes its nullable twin), and
        their clusters."""
        import pandas as pd

        check_is_fitted(self)
        rng = check_random_state(self.random_state)
        counts = rng.multinomial(n_samples, self.weights_)
        gen = np.random.default_rng(rng.randint(0, 2**31 - 1))
        rows = [r for c, n in zip(self.model_.components, counts)
                for r in c.sampler(gen).sample(int(n))]
        labels = np.repeat(np.arange(self._k()), counts)
        frame = pd.DataFrame(rows, columns=self.columns_)
        for name, dtype in self.dtypes_.items():  # the fitted frame's column types
            frame[name] = _as_dtype(frame[name], dtype)
        return frame, labels

    def _k(self) -> int:
        """The number of clusters: ``n_components``, or ``n_clusters`` (its old name) when set."""
        return self.n_components if self.n_clusters is None else self.n_clusters


def _declared_levels_kept(node: Any, pseudo_count: float) -> Any:
    """``node`` with ``pseudo_count`` added to a categorical of declared levels (a pandas
    Categorical's), so that a level no fitted row used keeps a positive probability."""
    if isinstance(node, dict) and "optional" in node:
        return {**node, "optional": _declared_levels_kept(node["optional"], pseudo_count)}
    if isinstance(node, dict) and isinstance(node.get("categorical"), dict) \
            and "levels" in node["categorical"]:
        return {"categorical": {"pseudo_count": pseudo_count, **node["categorical"]}}
    return node


def _as_dtype(column: Any, dtype: Any) -> Any:
    """``column`` as ``dtype``; with missing values an int or bool dtype becomes pandas' nullable
    one (Int64, boolean)."""
    import pandas as pd

    if column.isna().any() and (pd.api.types.is_integer_dtype(dtype)
                                or pd.api.types.is_bool_dtype(dtype)):
        dtype = "boolean" if pd.api.types.is_bool_dtype(dtype) else "Int64"
    try:
        return column.astype(dtype)
    except (TypeError, ValueError):
        return column
