"""hmmlearn-style hidden Markov models: :class:`GaussianHMM` (hmmlearn's ``GaussianHMM``: its
signatures, attributes, ``covars_`` shapes, ``init_params`` / ``params``, convergence monitor
and logged warnings), fitted by mixfold's EM; :class:`ConvergenceMonitor`, hmmlearn's monitor.

Parameters set by hand (``startprob_``, ``transmat_``, ``means_``, ``covars_``) are the model:
``score``, ``decode``, ``predict``, ``sample`` use them without a fit, and a fit starts from the
ones ``init_params`` does not name.
"""

from __future__ import annotations

import logging
import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

import mixfold
from mixfold.families import (DiagonalGaussianDistribution, Encoder, Estimator,
                              HiddenMarkovDistribution, HiddenMarkovEstimator,
                              MultivariateGaussianDistribution)
from mixfold.fit import int_at_least
from mixfold.sklearn._common import (_COMMON_RULES, _check_params, _gaussian, _is_nonneg,
                                     _seed, _workers)

__all__ = ["GaussianHMM", "ConvergenceMonitor", "HMM_COVARIANCE_TYPES", "IMPLEMENTATIONS"]

_log = logging.getLogger(__name__)

HMM_COVARIANCE_TYPES = ("spherical", "diag", "full", "tied")
#: hmmlearn's forward-backward implementations; mixfold computes in log space for both, and
#: "scaling" refuses, as hmmlearn's does, rows whose emission probabilities underflow.
IMPLEMENTATIONS = ("log", "scaling")
HMM_PARAMS = "stmc"
#: The attribute each letter of ``params`` / ``init_params`` names.
_ATTRIBUTES = {"s": "startprob_", "t": "transmat_", "m": "means_", "c": "covars_"}
#: The smallest log-probability a probability-space (scaling) pass can hold.
_LOG_TINY = float(np.log(np.finfo(np.float64).tiny))


class ConvergenceMonitor:
    """hmmlearn's convergence monitor: the fit's ``history`` (the total log-likelihood of
    every iteration, the scale of ``score``), ``iter`` and whether it ``converged`` (the last
    gain fell below ``tol``, or ``n_iter`` iterations ran); ``verbose`` reports each iteration
    on stderr in hmmlearn's format (``_template``).

    >>> m = ConvergenceMonitor(tol=1e-2, n_iter=10, verbose=False)
    >>> for ll in (-10.0, -9.0, -8.995):
    ...     m.report(ll)
    >>> m.converged, list(m.history)
    (True, [-10.0, -9.0, -8.995])
    """

    _template = "{iter:>10d} {log_prob:>16.8f} {delta:>+16.8f}"

    def __init__(self, tol: float, n_iter: int, verbose: bool):
        self.tol, self.n_iter, self.verbose = tol, n_iter, verbose
        self.history: deque[float] = deque()
        self.iter = 0

    def _reset(self) -> None:
        """Forget the history (hmmlearn's name: a fit resets its monitor)."""
        self.iter = 0
        self.history.clear()

    def report(self, log_prob: float) -> None:
        """Record one iteration's total log-likelihood (and print it when ``verbose``)."""
        if self.verbose:
            delta = log_prob - self.history[-1] if self.history else np.nan
            print(self._template.format(iter=self.iter + 1, log_prob=log_prob, delta=delta),
                  file=sys.stderr)
        self.history.append(log_prob)
        self.iter += 1

    @property
    def converged(self) -> bool:
        """Whether the last iteration gained less than ``tol`` (or the fit hit ``n_iter``)."""
        return (self.iter == self.n_iter or
                (len(self.history) >= 2 and self.history[-1] - self.history[-2] < self.tol))

    def __repr__(self) -> str:
        return (f"ConvergenceMonitor(history={list(self.history)}, iter={self.iter}, "
                f"n_iter={self.n_iter}, tol={self.tol}, verbose={self.verbose})")


# ---------------------------------------------------------------------------------------------
# Covariances: hmmlearn's stored form per covariance_type, and the emissions' form


def _stored_covars(value: Any, kind: str, n: int, d: int) -> np.ndarray:
    """``covars_`` as given, in hmmlearn's stored form: spherical (n,), diag (n, d), tied
    (d, d), full (n, d, d); full matrices are accepted for every type (their diagonals)."""
    arr = np.asarray(value, dtype=np.float64)
    shapes = {"spherical": (n,), "diag": (n, d), "tied": (d, d), "full": (n, d, d)}
    if arr.shape == shapes[kind]:
        return arr.copy()
    if kind == "spherical" and arr.size == n:
        return arr.reshape(n).copy()
    if kind in ("spherical", "diag") and arr.shape == (n, d, d):
        diag = np.diagonal(arr, axis1=1, axis2=2)
        return diag.mean(axis=1) if kind == "spherical" else diag.copy()
    if kind == "full" and arr.shape == (n, d):
        return np.array([np.diag(v) for v in arr])
    raise ValueError(f"GaussianHMM: covars_ must have shape {shapes[kind]} for "
                     f"covariance_type={kind!r}, got {arr.shape}")


def _full_covars(stored: np.ndarray, kind: str, n: int, d: int) -> np.ndarray:
    """hmmlearn's ``covars_``: one (d, d) matrix per state, whatever the type."""
    if kind == "full":
        return stored.copy()
    if kind == "tied":
        return np.repeat(stored[None], n, axis=0)
    variances = stored if kind == "diag" else np.repeat(stored[:, None], d, axis=1)
    return np.array([np.diag(v) for v in variances])


def _emissions_from(means: np.ndarray, stored: np.ndarray, kind: str) -> list[Any]:
    """The Gaussian emission of every state from ``means_`` and the stored covariances."""
    n, d = means.shape
    if kind == "full":
        return [MultivariateGaussianDistribution(m, c) for m, c in zip(means, stored)]
    if kind == "tied":
        return [MultivariateGaussianDistribution(m, stored) for m in means]
    variances = stored if kind == "diag" else np.repeat(stored[:, None], d, axis=1)
    return [DiagonalGaussianDistribution(m, v) for m, v in zip(means, variances)]


def _stored_from(emissions: Sequence[Any], kind: str) -> np.ndarray:
    """The stored covariances of fitted emissions (tied ones share one matrix)."""
    if kind == "full":
        return np.array([e.cov for e in emissions])
    if kind == "tied":
        return emissions[0].cov.copy()
    variances = np.array([e.sigma2 for e in emissions])
    return variances if kind == "diag" else variances.mean(axis=1)


def _tie(model: HiddenMarkovDistribution, kind: str,
         visits: np.ndarray | None = None) -> HiddenMarkovDistribution:
    """``model`` with its covariances as ``kind`` has them: tied, one covariance shared by the
    states (their own, averaged by the states' ``visits``: the pooled estimate); spherical, one
    variance per state (the mean of its diagonal)."""
    if kind not in ("tied", "spherical"):
        return model
    em = model.emissions
    if kind == "tied":
        w = np.ones(len(em)) if visits is None or visits.sum() <= 0 else visits
        shared = sum(wk * e.cov for wk, e in zip(w, em)) / w.sum()
        tied = [MultivariateGaussianDistribution(e.mu, shared) for e in em]
    else:
        tied = [DiagonalGaussianDistribution(e.mu, np.full(e.mu.size, e.sigma2.mean()))
                for e in em]
    return HiddenMarkovDistribution(tied, model.initial, model.transitions)


class HiddenMarkovPartsEstimator(HiddenMarkovEstimator):
    """A hidden Markov estimator of Gaussian emissions that keeps some parameters as given
    (hmmlearn's ``params``) and ties the covariances as ``covariance_type`` says: ``fixed``
    maps "s" (start probabilities), "t" (transitions), "m" (means) and "c" (the emissions'
    covariances) to their values; the others are estimated."""

    def __init__(self, emissions: Sequence[Estimator], pseudo_count: float = 0.0,
                 fixed: Mapping[str, np.ndarray] | None = None, covariance_type: str = "diag"):
        super().__init__(emissions, pseudo_count)
        self.fixed = dict(fixed or {})
        self.covariance_type = covariance_type

    def bind(self, encoder: Encoder) -> HiddenMarkovPartsEstimator:
        return HiddenMarkovPartsEstimator(super().bind(encoder).emissions, self.pseudo_count,
                                          self.fixed, self.covariance_type)

    def estimate(self, nobs: float, stats: Any) -> HiddenMarkovDistribution:
        own = stats[0]
        visits = own[0] + own[1].sum(axis=0)  # a state's items: first ones and arrivals
        model = _tie(super().estimate(nobs, stats), self.covariance_type, visits)
        return _with_parts(model, self.fixed)


def _parts_of(model: HiddenMarkovDistribution, letters: str) -> dict[str, np.ndarray]:
    """The parameters of ``model`` named by ``letters`` of "stmc" ("c": the emissions' own
    covariances, (n, d) variances or (n, d, d) matrices)."""
    full = isinstance(model.emissions[0], MultivariateGaussianDistribution)
    values = {"s": model.initial, "t": model.transitions,
              "m": np.array([e.mu for e in model.emissions]),
              "c": np.array([e.cov if full else e.sigma2 for e in model.emissions])}
    return {c: values[c] for c in letters}


def _with_parts(model: HiddenMarkovDistribution,
                parts: Mapping[str, np.ndarray]) -> HiddenMarkovDistribution:
    """``model`` with the parts in ``parts`` ("s", "t", "m", "c") replaced."""
    if not parts:
        return model
    emissions = []
    for k, e in enumerate(model.emissions):
        full = isinstance(e, MultivariateGaussianDistribution)
        mu = parts["m"][k] if "m" in parts else e.mu
        cov = parts["c"][k] if "c" in parts else (e.cov if full else e.sigma2)
        emissions.append(MultivariateGaussianDistribution(mu, cov) if full
                         else DiagonalGaussianDistribution(mu, cov))
    return HiddenMarkovDistribution(emissions, parts.get("s", model.initial),
                                    parts.get("t", model.transitions))


class GaussianHMM(BaseEstimator):
    """A hidden Markov model with Gaussian emissions, hmmlearn's ``GaussianHMM`` fitted by
    mixfold's EM, with hmmlearn's signatures.

    ``X`` is an array of shape (n_samples, n_features) holding one or more sequences one after
    another, ``lengths`` (default: one sequence) their lengths, summing to n_samples, the second
    argument of every method as in hmmlearn: ``fit(X, lengths)``, ``score(X, lengths)`` (total
    log-likelihood), ``score_samples(X, lengths)`` (it and the posteriors), ``decode(X,
    lengths, algorithm)`` (log-probability and states, ``"viterbi"`` or ``"map"``),
    ``predict``, ``predict_proba``, ``sample(n_samples, random_state, currstate)``,
    ``bic`` / ``aic``. Parameters as hmmlearn's: ``covariance_type`` ("spherical", "diag",
    "full", "tied": one covariance shared by the states), ``n_iter`` (0: the start itself),
    ``tol`` (on the gain of the total log-likelihood), ``verbose`` (the monitor's lines on
    stderr), ``params`` / ``init_params`` (letters of "stmc": start probabilities, transitions,
    means, covariances: which ones the fit updates / initialises; the others are taken from
    ``startprob_``, ``transmat_``, ``means_``, ``covars_`` set before ``fit``, and setting one
    that ``init_params`` then overwrites is logged as hmmlearn logs it), ``implementation``
    ("log" or "scaling": the same log-space computation; "scaling" refuses, as hmmlearn's,
    rows whose emission probabilities underflow), plus ``n_init`` (the best of several
    seeded starts), ``reg_covar``, ``pseudo_count`` and mixfold's ``backend``,
    ``num_workers``, ``precision``. Fitted: ``startprob_``, ``transmat_``, ``means_``,
    ``covars_`` (hmmlearn's shape, (n_components, n_features, n_features) for every type; the
    stored form, as hmmlearn's ``_covars_``, is what a setter takes), ``monitor_``,
    ``converged_``, ``n_iter_``, ``model_``. Parameters set by hand are usable without a fit.
    Differences from hmmlearn: ``n_iter`` defaults to 100 (hmmlearn: 10); ``reg_covar`` is added
    to the variances where hmmlearn has ``min_covar`` and covariance priors, and
    ``pseudo_count`` is added to the start and transition counts where hmmlearn has
    ``startprob_prior`` / ``transmat_prior``; with both at 0 a fit equals hmmlearn's with its
    priors off (``covars_prior=0, covars_weight=1``), from the same start.

    >>> import numpy as np
    >>> from mixfold import DiagonalGaussianDistribution as DG, HiddenMarkovDistribution
    >>> truth = HiddenMarkovDistribution([DG([-2.0], [1.0]), DG([2.0], [1.0])], [0.5, 0.5],
    ...                                  [[0.9, 0.1], [0.2, 0.8]])
    >>> X = np.vstack(truth.sampler(0, sample_length=50).sample(20)).reshape(-1, 1)
    >>> hmm = GaussianHMM(2, random_state=0).fit(X, [50] * 20)
    >>> order = np.argsort(hmm.means_[:, 0])
    >>> hmm.transmat_[np.ix_(order, order)].round(1).tolist()
    [[0.9, 0.1], [0.2, 0.8]]
    """

    def __init__(self, n_components: int = 1, covariance_type: str = "diag", *,
                 reg_covar: float = 1e-6, pseudo_count: float = 0.0,
                 algorithm: str = "viterbi", random_state: Any = None, n_iter: int = 100,
                 tol: float = 1e-2, verbose: bool = False, params: str = HMM_PARAMS,
                 init_params: str = HMM_PARAMS, implementation: str = "log", n_init: int = 1,
                 backend: Any = "local", num_workers: int | None = None,
                 precision: str = "float64", n_workers: int | None = None):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.reg_covar = reg_covar
        self.pseudo_count = pseudo_count
        self.algorithm = algorithm
        self.random_state = random_state
        self.n_iter = n_iter
        self.tol = tol
        self.verbose = verbose
        self.params = params
        self.init_params = init_params
        self.implementation = implementation
        self.n_init = n_init
        self.backend = backend
        self.num_workers = num_workers
        self.n_workers = n_workers
        self.precision = precision

    # --- hmmlearn's covars_: full matrices out, the stored form in

    @property
    def covars_(self) -> np.ndarray:
        """The covariance of every state, shape (n_components, n_features, n_features)."""
        d = np.shape(self.means_)[-1] if hasattr(self, "means_") else 1
        stored = _stored_covars(self._covars_, self.covariance_type, self.n_components, d)
        return _full_covars(stored, self.covariance_type, self.n_components, d)

    @covars_.setter
    def covars_(self, value: Any) -> None:
        self._covars_ = np.array(value, dtype=np.float64)

    # --- input and options

    def _sequences(self, X: Any, lengths: Any, reset: bool) -> list[np.ndarray]:
        X = validate_data(self, X, dtype=np.float64, reset=reset)
        if hasattr(self, "means_") and not reset and X.shape[1] != np.shape(self.means_)[-1]:
            raise ValueError(f"X has {X.shape[1]} features, but the model's means_ have "
                             f"{np.shape(self.means_)[-1]}")
        if lengths is None:
            return [X]
        lengths = np.atleast_1d(np.asarray(lengths))
        if lengths.ndim != 1 or lengths.dtype.kind not in "iu" or (lengths < 1).any() \
                or lengths.sum() != X.shape[0]:
            raise ValueError(f"lengths must be integers >= 1 summing to n_samples = {X.shape[0]},"
                             f" got {lengths.tolist() if lengths.ndim == 1 else lengths!r}")
        return np.split(X, np.cumsum(lengths)[:-1])

    def _check(self) -> None:
        letters = (lambda v: isinstance(v, str) and set(v) <= set(HMM_PARAMS),
                   f"a string of the letters {HMM_PARAMS!r}")
        _check_params(self, {"n_components": (lambda v: int_at_least(v, 1), "an integer >= 1"),
                             "covariance_type": (lambda v: v in HMM_COVARIANCE_TYPES,
                                                 f"one of {list(HMM_COVARIANCE_TYPES)}"),
                             "reg_covar": (_is_nonneg, "a finite number >= 0"),
                             "pseudo_count": (_is_nonneg, "a finite number >= 0"),
                             "algorithm": (lambda v: v in ("viterbi", "map"),
                                           "'viterbi' or 'map'"),
                             "implementation": (lambda v: v in IMPLEMENTATIONS,
                                                f"one of {list(IMPLEMENTATIONS)}"),
                             "n_iter": (lambda v: int_at_least(v, 0),
                                        "an integer >= 0 (0: the start itself)"),
                             "n_init": (lambda v: int_at_least(v, 1), "an integer >= 1"),
                             "params": letters, "init_params": letters,
                             **{k: v for k, v in _COMMON_RULES.items() if k != "max_iter"}})

    def _given_parts(self, letters: str, d: int) -> dict[str, np.ndarray]:
        """The parameters named by ``letters``, from the attributes set before ``fit``, in the
        emissions' form."""
        s = self.n_components
        parts = {}
        for letter in letters:
            name = _ATTRIBUTES[letter]
            if not hasattr(self, "_covars_" if letter == "c" else name):
                raise ValueError(f"GaussianHMM: {letter!r} is not in init_params="
                                 f"{self.init_params!r}, so {name} must be set before fit")
            if letter == "c":
                stored = _stored_covars(self._covars_, self.covariance_type, s, d)
                parts["c"] = _parts_of(HiddenMarkovDistribution(
                    _emissions_from(np.zeros((s, d)), stored, self.covariance_type),
                    np.full(s, 1 / s), np.full((s, s), 1 / s)), "c")["c"]
                continue
            value = np.asarray(getattr(self, name), dtype=np.float64)
            shape = {"s": (s,), "t": (s, s), "m": (s, d)}[letter]
            if value.shape != shape:
                raise ValueError(f"GaussianHMM: {name} must have shape {shape}, got "
                                 f"{value.shape}")
            parts[letter] = value
        return parts

    def _log_overwritten(self) -> None:
        """hmmlearn's log line for each attribute set by hand that ``init_params`` replaces."""
        for letter in self.init_params:
            name = _ATTRIBUTES[letter]
            if hasattr(self, "_covars_" if letter == "c" else name):
                _log.warning("Even though the %r attribute is set, it will be overwritten "
                             "during initialization because 'init_params' contains %r",
                             name, letter)

    def _log_too_little_data(self, n_values: int, d: int) -> None:
        s = self.n_components
        counts = {"s": s - 1, "t": s * (s - 1), "m": s * d,
                  "c": self._covariance_parameters(d)}
        free = sum(counts[c] for c in self.params)
        if n_values < free:
            _log.warning("Fitting a model with %d free scalar parameters with only %d data "
                         "points will result in a degenerate solution.", free, n_values)

    # --- fit

    def _starts(self, rows: list[np.ndarray], plain: Estimator, d: int,
                given: Mapping[str, np.ndarray]) -> list[HiddenMarkovDistribution]:
        """The starting models: seeded ones (unless every part is given), the given parts in
        their place, the covariances tied as ``covariance_type`` says."""
        seed = _seed(self.random_state)
        if set(given) == set(HMM_PARAMS):
            s = self.n_components
            bare = HiddenMarkovDistribution(
                _emissions_from(np.zeros((s, d)), _stored_covars(
                    self._covars_, self.covariance_type, s, d), self.covariance_type),
                np.full(s, 1 / s), np.full((s, s), 1 / s))
            return [_with_parts(bare, given)]
        seeded = [mixfold.fit(rows, plain, max_iter=0, seed=seed + i, backend="local",
                              progress=False).model for i in range(self.n_init)]
        return [_with_parts(_tie(m, self.covariance_type), given) for m in seeded]

    def _check_scaling(self, start: HiddenMarkovDistribution, rows: list[np.ndarray]) -> None:
        """hmmlearn's scaling pass works with probabilities: a row no state can emit above
        the smallest float64 underflows there, and is refused here too."""
        X = np.vstack(rows)
        best = np.max([e.seq_log_density(e.encoder().encode(X)) for e in start.emissions],
                      axis=0)
        low = np.flatnonzero(best < _LOG_TINY)
        if low.size:
            raise ValueError(f"implementation='scaling': the emission probabilities of row "
                             f"{int(low[0])} underflow (log-probability {best[low[0]]:.6g}); "
                             f"use implementation='log'")

    def fit(self, X: Any, lengths: Any = None) -> GaussianHMM:
        """Fit to the sequences stacked in ``X``, array of shape (n_samples, n_features);
        ``lengths``: their lengths (None: one sequence), as hmmlearn's ``fit(X, lengths)``."""
        self._check()
        rows = self._sequences(X, lengths, reset=True)
        n = sum(len(r) for r in rows)
        if n < self.n_components:
            raise ValueError(f"Expected n_samples >= n_components but got n_components = "
                             f"{self.n_components}, n_samples = {n}")
        d = rows[0].shape[1]
        self._log_overwritten()
        self._log_too_little_data(n * d, d)
        given = self._given_parts("".join(c for c in HMM_PARAMS if c not in self.init_params), d)
        emission = _gaussian("full" if self.covariance_type == "tied" else
                             self.covariance_type, self.reg_covar)
        plain = HiddenMarkovEstimator([emission] * self.n_components, self.pseudo_count)
        init = self._starts(rows, plain, d, given)
        if self.implementation == "scaling":
            self._check_scaling(init[0], rows)
        fixed = _parts_of(init[0], "".join(c for c in HMM_PARAMS if c not in self.params))
        estimator = HiddenMarkovPartsEstimator([emission] * self.n_components,
                                               self.pseudo_count, fixed, self.covariance_type)
        monitors: list[ConvergenceMonitor] = []
        result = mixfold.fit(rows, estimator, max_iter=self.n_iter, tol=0.0,
                             seed=_seed(self.random_state), init=init,
                             backend=self.backend, num_workers=_workers(self),
                             precision=self.precision, progress=False,
                             callbacks=[self._gain_below_tol(monitors, len(rows))])
        model = result.model
        model.fit_result = result
        self.monitor_ = monitors[result.start_log_likelihoods.index(
            result.final_log_likelihood)] if monitors else ConvergenceMonitor(
            self.tol, self.n_iter, self.verbose)
        self.model_ = model
        self.startprob_ = model.initial.copy()
        self.transmat_ = model.transitions.copy()
        self.means_ = np.array([e.mu for e in model.emissions])
        self._covars_ = _stored_from(model.emissions, self.covariance_type)
        self.converged_ = self.monitor_.converged
        self.n_iter_ = result.iterations
        self.lower_bound_ = result.final_log_likelihood
        return self

    def _gain_below_tol(self, monitors: list[ConvergenceMonitor],
                        n_sequences: int) -> Callable[[Any], bool]:
        """hmmlearn's criterion, one monitor per start: the gain of the total log-likelihood
        (the mean per sequence times the sequences), absolute."""
        def gain_below_tol(info: Any) -> bool:
            if info.iteration == 0:
                monitors.append(ConvergenceMonitor(self.tol, self.n_iter, self.verbose))
            monitors[-1].report(info.log_likelihood * n_sequences)
            return monitors[-1].converged

        return gain_below_tol

    # --- the model of the current parameters, fitted or set by hand

    def _chain(self) -> HiddenMarkovDistribution:
        check_is_fitted(self, ["startprob_", "transmat_", "means_", "_covars_"])
        means = np.asarray(self.means_, dtype=np.float64)
        means = means.reshape(self.n_components, -1)
        stored = _stored_covars(self._covars_, self.covariance_type, self.n_components,
                                means.shape[1])
        return HiddenMarkovDistribution(_emissions_from(means, stored, self.covariance_type),
                                        np.asarray(self.startprob_, dtype=np.float64),
                                        np.asarray(self.transmat_, dtype=np.float64))

    def _encoded(self, X: Any, lengths: Any) -> tuple[HiddenMarkovDistribution, Any]:
        chain = self._chain()
        return chain, chain.encoder().encode(self._sequences(X, lengths, reset=False))

    def predict(self, X: Any, lengths: Any = None) -> np.ndarray:
        """The most likely state of every row (by ``algorithm``), int array of shape
        (n_samples,)."""
        return self.decode(X, lengths)[1]

    def predict_proba(self, X: Any, lengths: Any = None) -> np.ndarray:
        """Posterior state probabilities of every row, array of shape (n_samples, n_components)."""
        chain, enc = self._encoded(X, lengths)
        return chain.seq_posterior(enc)

    def score(self, X: Any, lengths: Any = None) -> float:
        """Total log-likelihood of the sequences in ``X`` (hmmlearn's convention)."""
        chain, enc = self._encoded(X, lengths)
        return float(chain.seq_log_density(enc).sum())

    def score_samples(self, X: Any, lengths: Any = None) -> tuple[float, np.ndarray]:
        """hmmlearn's pair: the total log-likelihood and the posterior state probabilities."""
        chain, enc = self._encoded(X, lengths)
        return float(chain.seq_log_density(enc).sum()), chain.seq_posterior(enc)

    def decode(self, X: Any, lengths: Any = None,
               algorithm: str | None = None) -> tuple[float, np.ndarray]:
        """hmmlearn's pair: the log-probability and the states of every row. ``"viterbi"``: the
        most likely state paths and their joint log-probability; ``"map"``: the most probable
        state of each row and, as hmmlearn, the sum of the rows' largest posteriors."""
        algorithm = self.algorithm if algorithm is None else algorithm
        if algorithm not in ("viterbi", "map"):
            raise ValueError(f"algorithm must be 'viterbi' or 'map', got {algorithm!r}")
        chain, enc = self._encoded(X, lengths)
        if algorithm == "map":  # hmmlearn's value: the rows' largest posteriors, summed
            posterior = chain.seq_posterior(enc)
            return float(posterior.max(axis=1).sum()), posterior.argmax(axis=1)
        states = chain.seq_viterbi(enc)
        rows = self._sequences(X, lengths, reset=False)
        emit = np.column_stack([e.seq_log_density(e.encoder().encode(np.vstack(rows)))
                                for e in chain.emissions])
        first = np.zeros(len(states), dtype=bool)
        first[np.cumsum([0] + [len(r) for r in rows[:-1]])] = True
        with np.errstate(divide="ignore"):
            log_start, log_trans = np.log(chain.initial), np.log(chain.transitions)
        steps = log_trans[states[:-1], states[1:]][~first[1:]]
        log_prob = (emit[np.arange(len(states)), states].sum() + log_start[states[first]].sum()
                    + steps.sum())
        return float(log_prob), states

    def _covariance_parameters(self, d: int) -> int:
        s = self.n_components
        return {"spherical": s, "diag": s * d, "tied": d * (d + 1) // 2,
                "full": s * d * (d + 1) // 2}[self.covariance_type]

    def _n_parameters(self) -> int:
        """hmmlearn's count: every free parameter, whatever ``params`` updates."""
        s, d = self.n_components, np.shape(self.means_)[-1]
        return s - 1 + s * (s - 1) + s * d + self._covariance_parameters(d)

    def bic(self, X: Any, lengths: Any = None) -> float:
        """Bayesian information criterion (hmmlearn's: ``-2 * score + n_parameters *
        log(n_samples)``; lower is better)."""
        n = sum(len(r) for r in self._sequences(X, lengths, reset=False))
        return -2 * self.score(X, lengths) + self._n_parameters() * np.log(n)

    def aic(self, X: Any, lengths: Any = None) -> float:
        """Akaike information criterion: ``-2 * score + 2 * n_parameters``."""
        return -2 * self.score(X, lengths) + 2 * self._n_parameters()

    def sample(self, n_samples: int = 1, random_state: Any = None,
               currstate: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """One sequence of ``n_samples`` rows from the model and its hidden states (starting
        in ``currstate`` when given): (X of shape (n_samples, n_features), states of shape
        (n_samples,))."""
        chain = self._chain()
        if not int_at_least(n_samples, 1):
            raise ValueError(f"n_samples must be an integer >= 1, got {n_samples!r}")
        rng = check_random_state(self.random_state if random_state is None else random_state)
        states = np.empty(n_samples, dtype=np.int64)
        states[0] = rng.choice(self.n_components, p=chain.initial) if currstate is None \
            else currstate
        for t in range(1, n_samples):  # the chain itself: one draw per step
            states[t] = rng.choice(self.n_components, p=chain.transitions[states[t - 1]])
        gen = np.random.default_rng(rng.randint(0, 2**31 - 1))
        X = np.empty((n_samples, chain.emissions[0].mu.size))
        for k, emission in enumerate(chain.emissions):
            at = np.flatnonzero(states == k)
            if at.size:
                X[at] = np.asarray(emission.sampler(gen).sample(at.size)).reshape(at.size, -1)
        return X, states
