"""scikit-learn's ``BayesianGaussianMixture`` (variational Gaussian mixtures with a
Dirichlet-process or Dirichlet weight prior) fitted by mixfold's one EM loop: its parameters,
priors, attributes, stopping rule and error words.

scikit-learn's ``"diag"``, ``"spherical"`` and ``"tied"`` posteriors follow its own
conventions (``E log|Lambda|`` of a full Wishart with the covariance's degrees of freedom);
:class:`BayesianGaussians` makes that M-step from the fold's Gaussian statistics, so the fit
repeats scikit-learn's. mixfold's own :class:`~mixfold.VariationalMixtureEstimator` holds
independent Normal-Gamma coordinates for a diagonal Gaussian instead (the same for one
feature and for ``"full"``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import betaln, digamma, gammaln
from sklearn.base import BaseEstimator, DensityMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_random_state, validate_data

import mixfold
from mixfold.errors import NumericalError, ParameterError
from mixfold.families import (DiagonalGaussianDistribution, Encoder, Estimator, MixtureEstimator,
                              MultivariateGaussianDistribution, VariationalMixtureDistribution,
                              VariationalMixtureEstimator)
from mixfold.families._centred import central_moments
from mixfold.families.variational_mixture import weight_posterior
from mixfold.options import Rule, instance_of, none_or, one_of, rule
from mixfold.sklearn._common import _gaussian, _is_nonneg, _seed
from mixfold.sklearn.mixture import (_GAUSSIAN_MIXTURE_RULES, COVARIANCE_TYPES,
                                     ILL_DEFINED_COVARIANCE, NOT_CONVERGED, GaussianMixture,
                                     _fit_input, _MixtureMethods, _precisions,
                                     _precisions_cholesky, _shaped)

__all__ = ["BayesianGaussianMixture", "BayesianGaussians", "GaussianPriors"]

#: scikit-learn's names of the weight priors -> mixfold's
WEIGHT_PRIOR_TYPES = {"dirichlet_process": "dirichlet_process",
                      "dirichlet_distribution": "dirichlet"}


@dataclass(frozen=True)
class GaussianPriors:
    """scikit-learn's resolved priors: ``mean`` (D,), ``mean_precision``,
    ``degrees_of_freedom``, ``covariance`` ((D, D), (D,) or a number by covariance type),
    and the ``reg_covar`` added to each covariance estimate."""

    mean: np.ndarray
    mean_precision: float
    degrees_of_freedom: float
    covariance: Any
    reg_covar: float


class BayesianGaussians(VariationalMixtureEstimator):
    """scikit-learn's variational M-step for Gaussian components of ``covariance_type``, from
    the fold's Gaussian statistics. The model's ``kl`` makes the fit loop's bound scikit-learn's
    lower bound (which leaves out the terms constant in the data)."""

    option_rules = {**VariationalMixtureEstimator.option_rules,
                    "covariance_type": one_of(*COVARIANCE_TYPES),
                    "gaussian_priors": none_or(instance_of(GaussianPriors,
                                                           what="a GaussianPriors"))}

    def __init__(self, components: Sequence[Estimator], covariance_type: str = "full",
                 weight_prior: str = "dirichlet_process",
                 weight_concentration: float | None = None,
                 gaussian_priors: GaussianPriors | None = None):
        super().__init__(components, weight_prior, weight_concentration)
        self.check_options(covariance_type=covariance_type, gaussian_priors=gaussian_priors)
        self.covariance_type = covariance_type
        self.gaussian_priors = gaussian_priors

    def bind(self, encoder: Encoder) -> BayesianGaussians:
        return BayesianGaussians(MixtureEstimator.bind(self, encoder).components,
                                 self.covariance_type, self.weight_prior,
                                 self.weight_concentration, self.gaussian_priors)

    def _data_priors(self, nk: np.ndarray, xk: np.ndarray, second: np.ndarray) -> GaussianPriors:
        """scikit-learn's default priors from the components' statistics pooled (the data's
        mean and covariance, ``ddof=1``), when none were given."""
        n = nk.sum()
        mean = nk @ xk / n
        d = xk - mean
        if second.ndim == 3:
            cov = (np.einsum("k,kij->ij", nk, second) + np.einsum("k,ki,kj->ij", nk, d, d)) / n
        else:
            cov = (nk @ second + nk @ (d * d)) / n
            cov = cov.mean() if self.covariance_type == "spherical" else cov
        return GaussianPriors(mean, 1.0, float(xk.shape[1]), cov * n / max(n - 1.0, 1e-300),
                              float(self.components[0].reg_covar))

    def estimate(self, nobs: float, stats: Any) -> VariationalMixtureDistribution:
        (counts,), comp_stats = stats
        kind = self.covariance_type
        moments = [central_moments(*s[0]) if s[0][0][0] > 0 else
                   (0.0, np.zeros(s[0][1].size), np.zeros(s[0][2].shape)) for s in comp_stats]
        nk = np.array([m[0] for m in moments]) + 10 * np.finfo(float).eps
        xk = np.array([m[1] for m in moments])
        second = np.array([m[2] for m in moments])
        pr = self.gaussian_priors or self._data_priors(nk, xk, second)
        k, d = xk.shape
        weights = weight_posterior(nk, self.weight_prior, self.concentration)
        beta = pr.mean_precision + nk
        means = (pr.mean_precision * pr.mean + nk[:, None] * xk) / beta[:, None]
        diff = xk - pr.mean
        ratio = pr.mean_precision / beta
        if kind == "full":
            nu = pr.degrees_of_freedom + nk
            scale = pr.covariance + nk[:, None, None] * (
                second + pr.reg_covar * np.eye(d) + ratio[:, None, None]
                * np.einsum("ki,kj->kij", diff, diff))
            cov = scale / nu[:, None, None]
        elif kind == "tied":
            nu = np.full(k, pr.degrees_of_freedom + nk.sum() / k)
            pooled = np.einsum("k,kij->ij", nk, second) / nk.sum() + pr.reg_covar * np.eye(d)
            scale = pr.covariance + pooled * nk.sum() / k + pr.mean_precision / k * (
                (nk / beta) * diff.T) @ diff
            cov = np.broadcast_to(scale / nu[0], (k, d, d))
        else:
            nu = pr.degrees_of_freedom + nk
            var = second + pr.reg_covar
            spread = diff ** 2
            if kind == "spherical":
                var, spread = var.mean(axis=1, keepdims=True), spread.mean(axis=1, keepdims=True)
            cov = np.broadcast_to((pr.covariance + nk[:, None] * (var + ratio[:, None] * spread))
                                  / nu[:, None], (k, d))
        offsets = 0.5 * (d * np.log(2.0) - d * np.log(nu) - d / beta + digamma(
            0.5 * (nu[None, :] - np.arange(d)[:, None])).sum(axis=0))
        points = [MultivariateGaussianDistribution(m, c) for m, c in zip(means, cov)] \
            if kind in ("full", "tied") else \
            [DiagonalGaussianDistribution(m, c) for m, c in zip(means, cov)]
        kl = self._kl(nk, xk, second, weights, offsets, means, cov, beta, nu)
        return VariationalMixtureDistribution(
            points, weights.mean, weights.expected_log + offsets, weight_prior=self.weight_prior,
            prior_concentration=self.concentration, weight_concentration=weights.concentration,
            posteriors=[[{"node": "", "family": kind, "mean_precision": float(b),
                          "degrees_of_freedom": float(n)}] for b, n in zip(beta, nu)], kl=kl)

    def _kl(self, nk: np.ndarray, xk: np.ndarray, second: np.ndarray, weights: Any,
            offsets: np.ndarray, means: np.ndarray, cov: np.ndarray, beta: np.ndarray,
            nu: np.ndarray) -> float:
        """What makes ``L(q) - kl`` scikit-learn's lower bound: the expected log-joint of the
        statistics that made ``q``, less scikit-learn's bound without its entropy term."""
        d = xk.shape[1]
        off = xk - means
        if cov.ndim == 3:
            logdet = np.linalg.slogdet(cov)[1]
            precision = np.linalg.inv(cov)
            quadratic = np.einsum("kij,kji->k", precision, second) + np.einsum(
                "ki,kij,kj->k", off, precision, off)
        else:
            logdet = np.log(cov).sum(axis=1)
            scatter = second if second.ndim == 2 else np.einsum("kii->ki", second)
            quadratic = ((scatter + off ** 2) / cov).sum(axis=1)
        data = nk * (weights.expected_log + offsets - 0.5 * d * np.log(2 * np.pi)
                     - 0.5 * logdet) - 0.5 * nk * quadratic
        # scikit-learn's -log_wishart - log_norm_weight - D/2 sum log beta
        log_det_chol = -0.5 * logdet - 0.5 * d * np.log(nu)
        wishart = nu * log_det_chol + nu * d * 0.5 * np.log(2.0) + gammaln(
            0.5 * (nu[None, :] - np.arange(d)[:, None])).sum(axis=0)
        if self.weight_prior == "dirichlet_process":
            norm_weight = -betaln(*weights.concentration).sum()
        else:
            alpha = np.asarray(weights.concentration)
            norm_weight = gammaln(alpha.sum()) - gammaln(alpha).sum()
        bound_without_entropy = wishart.sum() - norm_weight - 0.5 * d * np.log(beta).sum()
        return float(data.sum() - bound_without_entropy)


class BayesianGaussianMixture(_MixtureMethods, DensityMixin, BaseEstimator):
    """Variational Bayesian Gaussian mixture, scikit-learn's ``BayesianGaussianMixture`` fitted
    by mixfold's EM loop (any backend, any precision band of the E-step).

    Parameters as scikit-learn's: ``n_components`` (an upper bound: the fit leaves the
    components it does not need with weights near zero), ``covariance_type``, ``tol`` (on
    the lower bound's absolute change), ``reg_covar``, ``max_iter``, ``n_init``,
    ``init_params``, ``weight_concentration_prior_type`` (``"dirichlet_process"`` or
    ``"dirichlet_distribution"``), ``weight_concentration_prior`` (1 / n_components),
    ``mean_precision_prior`` (1), ``mean_prior`` (the data's mean),
    ``degrees_of_freedom_prior`` (n_features), ``covariance_prior`` (the data's covariance),
    ``random_state`` (None: the seed 0, so fits repeat), ``warm_start``, ``verbose``,
    ``verbose_interval``; plus mixfold's ``backend``, ``num_workers`` and ``precision``.

    Fitted: ``weights_``, ``means_``, ``covariances_``, ``precisions_``,
    ``precisions_cholesky_``, ``weight_concentration_`` (the sticks' ``(a, b)`` or the
    Dirichlet's concentration), ``mean_precision_``, ``degrees_of_freedom_``, the resolved
    priors (``weight_concentration_prior_``, ``mean_precision_prior_``, ``mean_prior_``,
    ``degrees_of_freedom_prior_``, ``covariance_prior_``), ``converged_``, ``n_iter_``,
    ``lower_bound_`` (scikit-learn's lower bound, without the terms constant in the data),
    ``lower_bounds_`` and the mixfold model ``model_``.

    >>> import numpy as np
    >>> X = np.vstack([np.random.default_rng(0).normal(m, 0.5, size=(100, 2)) for m in (0, 5)])
    >>> bgm = BayesianGaussianMixture(n_components=5, random_state=0).fit(X)
    >>> int((bgm.weights_ > 0.05).sum()), bgm.converged_
    (2, True)
    """

    def __init__(self, *, n_components: int = 1, covariance_type: str = "full",
                 tol: float = 1e-3, reg_covar: float = 1e-6, max_iter: int = 100,
                 n_init: int = 1, init_params: str = "kmeans",
                 weight_concentration_prior_type: str = "dirichlet_process",
                 weight_concentration_prior: float | None = None,
                 mean_precision_prior: float | None = None, mean_prior: Any = None,
                 degrees_of_freedom_prior: float | None = None, covariance_prior: Any = None,
                 random_state: Any = None, warm_start: bool = False, verbose: int = 0,
                 verbose_interval: int = 10, backend: Any = "local",
                 num_workers: int | None = None, precision: str = "float64"):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.tol = tol
        self.reg_covar = reg_covar
        self.max_iter = max_iter
        self.n_init = n_init
        self.init_params = init_params
        self.weight_concentration_prior_type = weight_concentration_prior_type
        self.weight_concentration_prior = weight_concentration_prior
        self.mean_precision_prior = mean_precision_prior
        self.mean_prior = mean_prior
        self.degrees_of_freedom_prior = degrees_of_freedom_prior
        self.covariance_prior = covariance_prior
        self.random_state = random_state
        self.warm_start = warm_start
        self.verbose = verbose
        self.verbose_interval = verbose_interval
        self.backend = backend
        self.num_workers = num_workers
        self.precision = precision

    def _rules(self) -> dict[str, Rule]:
        positive = rule(lambda v: _is_nonneg(v) and v > 0, "a finite number > 0")
        return {"weight_concentration_prior_type": rule(
                    lambda v: v in WEIGHT_PRIOR_TYPES, f"one of {list(WEIGHT_PRIOR_TYPES)}"),
                "weight_concentration_prior": none_or(positive),
                "mean_precision_prior": none_or(positive),
                **_GAUSSIAN_MIXTURE_RULES}

    def _resolve_priors(self, X: np.ndarray) -> GaussianPriors:
        """scikit-learn's priors, their defaults from ``X`` (and its errors, in its words)."""
        d, kind = X.shape[1], self.covariance_type
        self.weight_concentration_prior_ = 1.0 / self.n_components \
            if self.weight_concentration_prior is None else self.weight_concentration_prior
        self.mean_precision_prior_ = 1.0 if self.mean_precision_prior is None \
            else self.mean_precision_prior
        self.mean_prior_ = X.mean(axis=0) if self.mean_prior is None else \
            _shaped(self.mean_prior, (d,), "means")
        if self.degrees_of_freedom_prior is None:
            self.degrees_of_freedom_prior_ = d
        elif self.degrees_of_freedom_prior > d - 1.0:
            self.degrees_of_freedom_prior_ = self.degrees_of_freedom_prior
        else:
            raise ValueError(f"The parameter 'degrees_of_freedom_prior' should be greater than "
                             f"{d - 1}, but got {self.degrees_of_freedom_prior:.3f}.")
        if self.covariance_prior is None:
            self.covariance_prior_ = {"full": np.atleast_2d(np.cov(X.T)),
                                      "tied": np.atleast_2d(np.cov(X.T)),
                                      "diag": np.var(X, axis=0, ddof=1),
                                      "spherical": np.var(X, axis=0, ddof=1).mean()}[kind]
        else:
            shape = {"full": (d, d), "tied": (d, d), "diag": (d,), "spherical": ()}[kind]
            self.covariance_prior_ = _shaped(self.covariance_prior, shape,
                                                    f"{kind} covariance_prior")
            if shape == () and not self.covariance_prior_ > 0:
                raise ValueError(f"'{kind} covariance_prior' should be positive")
            self.covariance_prior_ = self.covariance_prior_ if shape else \
                float(self.covariance_prior_)
        return GaussianPriors(np.asarray(self.mean_prior_, dtype=np.float64),
                              float(self.mean_precision_prior_),
                              float(self.degrees_of_freedom_prior_),
                              self.covariance_prior_, float(self.reg_covar))

    def _stop_rule(self, carried: float) -> Callable[[Any], bool]:
        """scikit-learn's: the lower bound changed by less than ``tol`` (absolute)."""
        last = [carried]

        def converged(info: Any) -> bool:
            if info.iteration == 0:
                last[0] = carried
            change, last[0] = info.lower_bound - last[0], info.lower_bound
            if self.verbose >= 2 and (info.iteration + 1) % self.verbose_interval == 0:
                print(f"  Iteration {info.iteration + 1}\t lower bound change {change:.5f}")
            return abs(change) < self.tol

        return converged

    def fit(self, X: Any, y: Any = None) -> BayesianGaussianMixture:
        """Fit to ``X``, array of shape (n_samples, n_features); ``y`` is ignored."""
        warm, dtype, X = _fit_input(self, X)
        estimator = BayesianGaussians(
            [_gaussian(self.covariance_type, self.reg_covar)] * self.n_components,
            self.covariance_type, WEIGHT_PRIOR_TYPES[self.weight_concentration_prior_type],
            self.weight_concentration_prior, self._resolve_priors(X))
        try:
            if warm:
                init: Any = self.model_
            else:
                rng = check_random_state(0 if self.random_state is None else self.random_state)
                init = [estimator.from_responsibilities(
                    X, GaussianMixture._start_responsibilities(self, X, rng))
                    for _ in range(self.n_init)]
            result = mixfold.fit(X, estimator, max_iter=self.max_iter, tol=0.0,
                                 seed=_seed(self.random_state), init=init, backend=self.backend,
                                 num_workers=self.num_workers, precision=self.precision,
                                 progress=False, callbacks=[self._stop_rule(
                                     self.lower_bound_ if warm else -np.inf)])
        except (ParameterError, NumericalError) as err:
            raise ValueError(ILL_DEFINED_COVARIANCE) from err
        self._set_fitted(result, dtype)
        if self.verbose:
            print(f"Initialization {'converged' if self.converged_ else 'did not converge'}.")
        if not self.converged_ and self.max_iter > 0:
            warnings.warn(NOT_CONVERGED, ConvergenceWarning, stacklevel=2)
        return self

    def _set_fitted(self, result: Any, dtype: np.dtype) -> None:
        model = result.model
        model.fit_result = result
        self.model_ = model
        bounds = result.lower_bound
        self.converged_ = result.stop_reason in ("callback", "converged") or (
            result.stop_reason == "decrease" and len(bounds) > 1
            and abs(bounds[-1] - bounds[-2]) < self.tol)
        self.n_iter_ = result.iterations
        self.lower_bound_ = bounds[-1] if bounds else -np.inf
        self.lower_bounds_ = list(bounds)
        kind = self.covariance_type
        comps = model.components
        if kind == "full":
            cov = np.array([c.cov for c in comps])
        elif kind == "tied":
            cov = comps[0].cov.copy()
        elif kind == "diag":
            cov = np.array([c.sigma2 for c in comps])
        else:
            cov = np.array([c.sigma2[0] for c in comps])
        posterior = [p[0] for p in model.posteriors]
        self.weights_ = model.weights.astype(dtype)
        self.means_ = np.array([c.mu for c in comps]).astype(dtype)
        self.covariances_ = cov.astype(dtype)
        self.precisions_ = _precisions(cov, kind).astype(dtype)
        self.precisions_cholesky_ = _precisions_cholesky(model, kind).astype(dtype)
        self.mean_precision_ = np.array([p["mean_precision"] for p in posterior])
        dof = np.array([p["degrees_of_freedom"] for p in posterior])
        self.degrees_of_freedom_ = dof[0] if kind == "tied" else dof
        wc = model.weight_concentration
        self.weight_concentration_ = tuple(wc) if isinstance(wc, list) else wc.copy()

    def _encoded(self, X: Any) -> Any:
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self.model_.encoder().encode(X)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Posterior probability of each component, array of shape (n_samples, n_components)."""
        return super().predict_proba(X).astype(self.means_.dtype, copy=False)

    def score_samples(self, X: Any) -> np.ndarray:
        """The expected log joint ``log sum_k exp(E log w_k + E log p_k(x))`` of each row, array
        of shape (n_samples,), as scikit-learn's."""
        return super().score_samples(X).astype(self.means_.dtype, copy=False)

    sample = GaussianMixture.sample
