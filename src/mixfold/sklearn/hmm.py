"""hmmlearn-style hidden Markov models: :class:`GaussianHMM`, :class:`CategoricalHMM`,
:class:`MultinomialHMM` and :class:`PoissonHMM` (hmmlearn's: their signatures, attributes,
``covars_`` shapes, ``init_params`` / ``params``, convergence monitor and logged warnings),
fitted by mixfold's EM; :class:`ConvergenceMonitor`, hmmlearn's monitor.

Parameters set by hand (``startprob_``, ``transmat_``, ``means_``, ``covars_``,
``emissionprob_``, ``lambdas_``) are the model:
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
from sklearn.cluster import KMeans
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

import mixfold
from mixfold.families import (CategoricalDistribution, CategoricalEstimator,
                              CompositeDistribution, CompositeEstimator,
                              DiagonalGaussianDistribution, Encoder, Estimator,
                              HiddenMarkovDistribution, HiddenMarkovEstimator,
                              MixtureDistribution, MixtureEstimator, MultinomialDistribution,
                              MultinomialEstimator,
                              MultivariateGaussianDistribution, PoissonDistribution,
                              PoissonEstimator)
from mixfold.options import Rule, integer, rule
from mixfold.sklearn._common import (_COMMON_RULES, _check_params, _gaussian, _is_nonneg,
                                     _seed, _workers)

__all__ = ["GaussianHMM", "GMMHMM", "CategoricalHMM", "MultinomialHMM", "PoissonHMM",
           "ConvergenceMonitor",
           "HMM_COVARIANCE_TYPES", "IMPLEMENTATIONS"]

_log = logging.getLogger(__name__)

HMM_COVARIANCE_TYPES = ("spherical", "diag", "full", "tied")
#: hmmlearn's forward-backward implementations; mixfold computes in log space for both, and
#: "scaling" refuses, as hmmlearn's does, rows whose emission probabilities underflow.
IMPLEMENTATIONS = ("log", "scaling")
HMM_PARAMS = "stmc"
#: hmmlearn's letters of the chain's parameters, and the names ``frozen=`` holds them by
HMM_CHAIN_LETTERS = (("s", "initial"), ("t", "transitions"))
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
    if kind == "spherical" and arr.shape == (n, d):  # what hmmlearn's spherical fit stores
        return arr.mean(axis=1)
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


class HiddenMarkovPartsEstimator(HiddenMarkovEstimator):
    """A hidden Markov estimator that keeps some parameters as given (hmmlearn's ``params``):
    ``fixed`` maps "s" (start probabilities), "t" (transitions), "m" (means), "c" (the
    emissions' covariances) and the other emission letters to their values; the others are
    estimated."""

    option_rules = {**HiddenMarkovEstimator.option_rules,
                    "fixed": rule(lambda v: v is None or isinstance(v, Mapping),
                                  "None or a mapping from parameter letters to arrays")}

    def __init__(self, emissions: Sequence[Estimator],
                 fixed: Mapping[str, np.ndarray] | None = None, *, initial_prior: Any = None,
                 transition_prior: Any = None):
        super().__init__(emissions, initial_prior=initial_prior,
                         transition_prior=transition_prior)
        self.check_options(fixed=fixed)
        self.fixed = dict(fixed or {})

    def bind(self, encoder: Encoder) -> HiddenMarkovPartsEstimator:
        return HiddenMarkovPartsEstimator(super().bind(encoder).emissions, self.fixed,
                                          initial_prior=self.initial_prior,
                                          transition_prior=self.transition_prior)

    def estimate(self, nobs: float, stats: Any) -> HiddenMarkovDistribution:
        return _with_parts(super().estimate(nobs, stats), self.fixed)


def _parts_of(model: HiddenMarkovDistribution, letters: str) -> dict[str, np.ndarray]:
    """The parameters of ``model`` named by ``letters`` of "stmcel" ("c": the Gaussian
    emissions' own covariances, (n, d) variances or (n, d, d) matrices; "e": the categorical
    or multinomial emissions' probabilities; "l": the Poisson emissions' rates)."""
    em = model.emissions
    if isinstance(em[0], MixtureDistribution):  # GMMHMM: one mixture per state
        return {c: np.array([_parts_of_mixture(e)[c] for e in em]) for c in letters if c in "wmc"} \
            | {c: (model.initial if c == "s" else model.transitions) for c in letters if c in "st"}
    values = {"s": lambda: model.initial, "t": lambda: model.transitions,
              "m": lambda: np.array([e.mu for e in em]),
              "c": lambda: np.array([e.cov if isinstance(e, MultivariateGaussianDistribution)
                                     else e.sigma2 for e in em]),
              "e": lambda: np.array([e.probs for e in em]),
              "l": lambda: np.array([[f.lam for f in e.factors] for e in em])}
    return {c: values[c]() for c in letters}


def _with_parts(model: HiddenMarkovDistribution,
                parts: Mapping[str, np.ndarray]) -> HiddenMarkovDistribution:
    """``model`` with the parts in ``parts`` ("s", "t", "m", "c", "e") replaced."""
    if not parts:
        return model
    emissions = []
    for k, e in enumerate(model.emissions):
        if isinstance(e, CategoricalDistribution):
            emissions.append(CategoricalDistribution(parts["e"][k], levels=e.levels)
                             if "e" in parts else e)
            continue
        if isinstance(e, MixtureDistribution):  # GMMHMM: one mixture per state
            own = _parts_of_mixture(e)
            emissions.append(_gaussian_mixture(*(parts[c][k] if c in parts else own[c]
                                                 for c in "wmc")))
            continue
        if isinstance(e, CompositeDistribution):  # independent Poisson counts
            emissions.append(_poissons(parts["l"][k]) if "l" in parts else e)
            continue
        if isinstance(e, MultinomialDistribution):
            emissions.append(MultinomialDistribution(parts["e"][k], levels=e.levels,
                                                     trials=e.trials) if "e" in parts else e)
            continue
        full = isinstance(e, MultivariateGaussianDistribution)
        mu = parts["m"][k] if "m" in parts else e.mu
        cov = parts["c"][k] if "c" in parts else (e.cov if full else e.sigma2)
        emissions.append(MultivariateGaussianDistribution(mu, cov) if full
                         else DiagonalGaussianDistribution(mu, cov))
    return HiddenMarkovDistribution(emissions, parts.get("s", model.initial),
                                    parts.get("t", model.transitions))


def _parts_of_mixture(mixture: MixtureDistribution) -> dict[str, np.ndarray]:
    """One GMMHMM state's weights, means and its components' own covariances."""
    comps = mixture.components
    full = isinstance(comps[0], MultivariateGaussianDistribution)
    return {"w": mixture.weights, "m": np.array([c.mu for c in comps]),
            "c": np.array([c.cov if full else c.sigma2 for c in comps])}


def _gaussian_mixture(weights: np.ndarray, means: np.ndarray,
                      covs: np.ndarray) -> MixtureDistribution:
    """A state's mixture of Gaussians: (n_mix, d) variances or (n_mix, d, d) matrices."""
    full = covs.ndim == 3
    return MixtureDistribution([MultivariateGaussianDistribution(m, c) if full
                                else DiagonalGaussianDistribution(m, c)
                                for m, c in zip(means, covs)], weights)


def _poissons(rates: np.ndarray) -> CompositeDistribution:
    """One state's emission of independent Poisson counts, one rate per feature."""
    return CompositeDistribution([PoissonDistribution(float(lam)) for lam in rates])


class _HiddenMarkovWrapper(BaseEstimator):
    """What hmmlearn's models share: ``params`` / ``init_params`` letters, hand-set parameters
    as the model, the fit through mixfold's EM with hmmlearn's monitor, and scoring, decoding
    and sampling. A subclass names its emission letters and supplies its emissions."""

    #: the letters of ``params`` / ``init_params`` and the attribute each names
    _attributes: dict[str, str] = {"s": "startprob_", "t": "transmat_"}

    def _letters(self) -> str:
        return "".join(self._attributes)

    # --- hooks of the emission family

    def _validated(self, X: Any, reset: bool) -> np.ndarray:
        raise NotImplementedError

    def _items(self, rows: np.ndarray) -> Any:
        """One sequence's items as the emissions' encoder reads them."""
        return rows

    def _emission_rules(self) -> dict[str, Rule]:
        return {}

    def _emission_estimator(self, d: int) -> Estimator:
        raise NotImplementedError

    def _emission_estimators(self, d: int) -> list[Estimator]:
        """One emission estimator per state (each with its state's priors)."""
        return [self._emission_estimator(d)] * self.n_components

    def _emissions(self) -> list[Any]:
        """The emissions of the parameters set (by hand or by a fit)."""
        raise NotImplementedError

    def _emission_free_parameters(self, d: int) -> dict[str, int]:
        raise NotImplementedError

    def _chain_priors(self) -> dict[str, np.ndarray]:
        """hmmlearn's ``startprob_prior`` and ``transmat_prior`` (Dirichlet concentrations),
        ``pseudo_count`` added to both."""
        s = self.n_components
        return {"initial_prior": _prior_array(self.startprob_prior, (s,), "startprob_prior",
                                              self) + self.pseudo_count,
                "transition_prior": _prior_array(self.transmat_prior, (s, s), "transmat_prior",
                                                 self) + self.pseudo_count}

    def _set_emissions(self, model: HiddenMarkovDistribution) -> None:
        raise NotImplementedError

    def _stored_name(self, letter: str) -> str:
        """The attribute whose presence says a part was set (a property's stored form)."""
        return self._attributes[letter]

    def _given_emission_part(self, letter: str, d: int) -> np.ndarray:
        raise NotImplementedError

    # --- input and options

    def _sequences(self, X: Any, lengths: Any, reset: bool) -> list[Any]:
        X = self._validated(X, reset)
        if lengths is None:
            return [self._items(X)]
        lengths = np.atleast_1d(np.asarray(lengths))
        if lengths.ndim != 1 or lengths.dtype.kind not in "iu" or (lengths < 1).any() \
                or lengths.sum() != X.shape[0]:
            raise ValueError(f"lengths must be integers >= 1 summing to n_samples = {X.shape[0]},"
                             f" got {lengths.tolist() if lengths.ndim == 1 else lengths!r}")
        return [self._items(part) for part in np.split(X, np.cumsum(lengths)[:-1])]

    def _check(self) -> None:
        """The options, and the parameters set by hand, checked as hmmlearn's ``_check``."""
        letters = rule(lambda v: isinstance(v, str) and set(v) <= set(self._letters()),
                       f"a string of the letters {self._letters()!r}")
        _check_params(self, {"n_components": integer(1),
                             "pseudo_count": rule(_is_nonneg, "a finite number >= 0"),
                             "algorithm": rule(lambda v: v in ("viterbi", "map"),
                                           "'viterbi' or 'map'"),
                             "implementation": rule(lambda v: v in IMPLEMENTATIONS,
                                                f"one of {list(IMPLEMENTATIONS)}"),
                             "n_iter": rule(lambda v: integer(0).accepts(v),
                                        "an integer >= 0 (0: the start itself)"),
                             "n_init": integer(1),
                             "params": letters, "init_params": letters,
                             "startprob_prior": _PRIOR, "transmat_prior": _PRIOR,
                             **self._emission_rules(),
                             **{k: v for k, v in _COMMON_RULES.items() if k != "max_iter"}})
        s = self.n_components
        for name, shape in (("startprob_", (s,)), ("transmat_", (s, s))):
            if hasattr(self, name):
                _probabilities(getattr(self, name), shape, name, type(self).__name__)

    def _given_parts(self, letters: str, d: int) -> dict[str, np.ndarray]:
        """The parts named by ``letters`` that were set before ``fit`` (the emissions' form);
        a part not set is initialised, as hmmlearn's ``_init`` does."""
        parts = {}
        for letter in letters:
            if not hasattr(self, self._stored_name(letter)):
                continue
            if letter in "st":
                s = self.n_components
                parts[letter] = _probabilities(getattr(self, self._attributes[letter]),
                                               (s,) if letter == "s" else (s, s),
                                               self._attributes[letter], type(self).__name__)
            else:
                parts[letter] = self._given_emission_part(letter, d)
        return parts

    def _log_overwritten(self) -> None:
        """hmmlearn's log line for each attribute set by hand that ``init_params`` replaces."""
        for letter in self.init_params:
            if hasattr(self, self._stored_name(letter)):
                _log.warning("Even though the %r attribute is set, it will be overwritten "
                             "during initialization because 'init_params' contains %r",
                             self._attributes[letter], letter)

    def _log_too_little_data(self, n_values: int, d: int) -> None:
        s = self.n_components
        counts = {"s": s - 1, "t": s * (s - 1), **self._emission_free_parameters(d)}
        free = sum(counts[c] for c in self.params)
        if n_values < free:
            _log.warning("Fitting a model with %d free scalar parameters with only %d data "
                         "points will result in a degenerate solution.", free, n_values)

    # --- fit

    def _starts(self, rows: list[Any], plain: Estimator,
                given: Mapping[str, np.ndarray]) -> list[HiddenMarkovDistribution]:
        """The starting models: hmmlearn's recipe where the model follows it (``init``), else
        mixfold's seeded ones (unless every part is given), the given parts in their place."""
        if set(given) == set(self._letters()):
            return [self._chain()]
        seed = _seed(self.random_state)
        recipes = [self._recipe_start(rows, seed + i, given) for i in range(self.n_init)]
        if all(r is not None for r in recipes):
            return [_with_parts(r, given) for r in recipes]
        seeded = [mixfold.fit(rows, plain, max_iter=0, seed=seed + i, backend="local",
                              progress=False).model for i in range(self.n_init)]
        return [_with_parts(m, given) for m in seeded]

    def _recipe_start(self, rows: list[Any], seed: int,
                      given: Mapping[str, np.ndarray]) -> HiddenMarkovDistribution | None:
        """hmmlearn's ``_init`` recipe of a start from the rows alone (however they are cut
        into sequences) with ``seed``, the ``given`` parts not drawn; None: this model starts
        from mixfold's seeded fit."""
        return None

    def _recipe_chain(self, rng: np.random.RandomState,
                      given: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """hmmlearn's start and transition probabilities: Dirichlet(1 / n_components) draws
        from ``rng`` in its order, for the parts not given (those stay)."""
        s = self.n_components
        alpha = np.full(s, 1 / s)
        start = given["s"] if "s" in given else rng.dirichlet(alpha)
        return start, given["t"] if "t" in given else rng.dirichlet(alpha, size=s)

    def _check_scaling(self, start: HiddenMarkovDistribution, rows: list[Any]) -> None:
        """hmmlearn's scaling pass works with probabilities: a row no state can emit above
        the smallest float64 underflows there, and is refused here too."""
        items = np.concatenate(rows)
        best = np.max([e.seq_log_density(e.encoder().encode(items)) for e in start.emissions],
                      axis=0)
        low = np.flatnonzero(best < _LOG_TINY)
        if low.size:
            raise ValueError(f"implementation='scaling': the emission probabilities of row "
                             f"{int(low[0])} underflow (log-probability {best[low[0]]:.6g}); "
                             f"use implementation='log'")

    def fit(self, X: Any, lengths: Any = None) -> Any:
        """Fit to the sequences stacked in ``X``, array of shape (n_samples, n_features);
        ``lengths``: their lengths (None: one sequence), as hmmlearn's ``fit(X, lengths)``."""
        self._check()
        rows = self._sequences(X, lengths, reset=True)
        n = sum(len(r) for r in rows)
        if n < self.n_components:
            raise ValueError(f"Expected n_samples >= n_components but got n_components = "
                             f"{self.n_components}, n_samples = {n}")
        d = self.n_features_in_
        self._log_overwritten()
        self._log_too_little_data(n * d, d)
        letters = self._letters()
        given = self._given_parts("".join(c for c in letters if c not in self.init_params), d)
        emissions = self._emission_estimators(d)
        priors = self._chain_priors()
        plain = HiddenMarkovEstimator(emissions, **priors)
        init = self._starts(rows, plain, given)
        if self.implementation == "scaling":
            self._check_scaling(init[0], rows)
        held = "".join(c for c in letters if c not in self.params)
        chain = dict(HMM_CHAIN_LETTERS)  # the chain's letters are frozen=, the emissions' fixed
        fixed = _parts_of(init[0], "".join(c for c in held if c not in chain))
        estimator = HiddenMarkovPartsEstimator(emissions, fixed, **priors)
        estimator.frozen = tuple(chain[c] for c in held if c in chain)
        monitors: list[ConvergenceMonitor] = []
        result = mixfold.fit(rows, estimator, max_iter=self.n_iter,
                             tol=0.0, seed=_seed(self.random_state), init=init,
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
        self._set_emissions(model)
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
        check_is_fitted(self, ["startprob_", "transmat_"] + [
            self._stored_name(c) for c in self._letters() if c not in "st"])
        name = type(self).__name__
        s = self.n_components
        return HiddenMarkovDistribution(
            self._emissions(), _probabilities(self.startprob_, (s,), "startprob_", name),
            _probabilities(self.transmat_, (s, s), "transmat_", name))

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
        items = np.concatenate(rows)
        emit = np.column_stack([e.seq_log_density(e.encoder().encode(items))
                                for e in chain.emissions])
        first = np.zeros(len(states), dtype=bool)
        first[np.cumsum([0] + [len(r) for r in rows[:-1]])] = True
        with np.errstate(divide="ignore"):
            log_start, log_trans = np.log(chain.initial), np.log(chain.transitions)
        steps = log_trans[states[:-1], states[1:]][~first[1:]]
        log_prob = (emit[np.arange(len(states)), states].sum() + log_start[states[first]].sum()
                    + steps.sum())
        return float(log_prob), states

    def _n_parameters(self) -> int:
        """hmmlearn's count: every free parameter, whatever ``params`` updates."""
        s = self.n_components
        emission = self._emission_free_parameters(self._n_features())
        return s - 1 + s * (s - 1) + sum(emission[c] for c in self._letters() if c not in "st")

    def _n_features(self) -> int:
        raise NotImplementedError

    def _sampled_rows(self, values: Any) -> np.ndarray:
        """An emission's draws as rows of ``X``."""
        values = np.asarray(values)
        return values.reshape(len(values), -1)

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
        if not integer(1).accepts(n_samples):
            raise ValueError(f"n_samples must be an integer >= 1, got {n_samples!r}")
        rng = check_random_state(self.random_state if random_state is None else random_state)
        states = np.empty(n_samples, dtype=np.int64)
        states[0] = rng.choice(self.n_components, p=chain.initial) if currstate is None \
            else currstate
        for t in range(1, n_samples):  # the chain itself: one draw per step
            states[t] = rng.choice(self.n_components, p=chain.transitions[states[t - 1]])
        gen = np.random.default_rng(rng.randint(0, 2**31 - 1))
        draws = []
        for k, emission in enumerate(chain.emissions):
            at = np.flatnonzero(states == k)
            if at.size:
                draws.append((at, self._sampled_rows(emission.sampler(gen).sample(at.size))))
        X = np.empty((n_samples, draws[0][1].shape[1]), dtype=draws[0][1].dtype)
        for at, values in draws:
            X[at] = values
        return X, states


def _probabilities(value: Any, shape: tuple[int, ...], name: str, owner: str) -> np.ndarray:
    """A probability vector (or rows of them) set by hand, checked as hmmlearn checks it."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != shape:
        raise ValueError(f"{owner}: {name} must have shape {shape}, got {arr.shape}")
    if not np.allclose(arr.sum(axis=-1), 1.0) or (arr < 0).any():
        raise ValueError(f"{owner}: {name} must be probabilities summing to 1"
                         f"{' along each row' if arr.ndim > 1 else ''}, got sums "
                         f"{np.round(arr.sum(axis=-1), 6).tolist()}")
    return arr


def _is_prior(v: Any) -> bool:
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return a.size > 0 and bool(np.isfinite(a).all())


#: What hmmlearn's prior parameters accept: finite numbers, one or an array of them.
_PRIOR = rule(_is_prior, "a finite number or an array of finite numbers")


#: Where a Gaussian model's fit starts: hmmlearn's recipe, or mixfold's seeded start.
INITS = ("hmmlearn", "mixfold")
_INIT = rule(lambda v: v in INITS, f"one of {list(INITS)}")


def _data_covariance(X: np.ndarray, min_covar: float) -> np.ndarray:
    """hmmlearn's start covariance: the rows' (n - 1) covariance plus ``min_covar`` I (one
    row: ``min_covar`` I, where hmmlearn's is NaN)."""
    d = X.shape[1]
    spread = np.atleast_2d(np.cov(X.T)) if X.shape[0] > 1 else np.zeros((d, d))
    return spread + min_covar * np.eye(d)


def _prior_array(value: Any, shape: tuple[int, ...], name: str,
                 owner: BaseEstimator) -> np.ndarray:
    """A prior parameter broadcast to ``shape`` as NumPy broadcasts it in hmmlearn's M-step."""
    try:
        return np.broadcast_to(np.asarray(value, dtype=np.float64), shape).copy()
    except ValueError:
        raise ValueError(f"{type(owner).__name__}: {name} must broadcast to shape {shape}, got "
                         f"shape {np.shape(value)}") from None


class GaussianHMM(_HiddenMarkovWrapper):
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
    ``startprob_``, ``transmat_``, ``means_``, ``covars_`` when set before ``fit``, and setting
    one that ``init_params`` then overwrites is logged as hmmlearn logs it), ``implementation``
    ("log" or "scaling": the same log-space computation; "scaling" refuses, as hmmlearn's,
    rows whose emission probabilities underflow), ``min_covar`` (added to the start's
    covariance), plus ``init`` ("hmmlearn": the start as hmmlearn's ``_init`` makes it, k-means
    centres and the rows' covariance, the same numbers for the same ``random_state``, from the
    rows alone however they are cut; "mixfold": mixfold's seeded start, k-means++ then one EM
    step), ``n_init`` (the best of several starts, ``random_state``, ``random_state + 1``, ...),
    ``reg_covar``, ``pseudo_count`` and mixfold's ``backend``,
    ``num_workers``, ``precision``. Fitted: ``startprob_``, ``transmat_``, ``means_``,
    ``covars_`` (hmmlearn's shape, (n_components, n_features, n_features) for every type; the
    stored form, as hmmlearn's ``_covars_``, is what a setter takes), ``monitor_``,
    ``converged_``, ``n_iter_``, ``model_``. Parameters set by hand are usable without a fit.
    hmmlearn's priors, with its defaults and meaning (the M-step is their maximum a
    posteriori, computed by the core estimators' options): ``startprob_prior`` (a number or
    (n_components,)) and ``transmat_prior`` (a number or (n_components, n_components)),
    Dirichlet concentrations; ``means_prior`` ((n_components, n_features)) and
    ``means_weight`` ((n_components,)), a Normal prior on the means; ``covars_prior`` and
    ``covars_weight``, the covariances' prior (diag/spherical: ``var = (covars_prior + S) /
    (n + max(covars_weight - 1, 0))``; full/tied: ``(covars_prior + S) / (n +
    max(covars_weight - n_features, 0))``, tied pooling the states' S and n), each broadcast as
    hmmlearn's arithmetic broadcasts it. Differences from hmmlearn: ``n_iter`` defaults to 100
    (hmmlearn: 10); ``reg_covar`` (1e-6) is added to the variances after the prior (0: exactly
    hmmlearn's M-step); ``pseudo_count`` adds to both chain priors; a probability at 0 is kept
    at 0 by hmmlearn's M-step whatever its prior, here a prior above 1 lifts it.

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

    _attributes = {"s": "startprob_", "t": "transmat_", "m": "means_", "c": "covars_"}

    def __init__(self, n_components: int = 1, covariance_type: str = "diag", *,
                 min_covar: float = 1e-3,
                 startprob_prior: Any = 1.0, transmat_prior: Any = 1.0, means_prior: Any = 0,
                 means_weight: Any = 0, covars_prior: Any = 1e-2, covars_weight: Any = 1,
                 init: str = "hmmlearn", reg_covar: float = 1e-6, pseudo_count: float = 0.0,
                 algorithm: str = "viterbi", random_state: Any = None, n_iter: int = 100,
                 tol: float = 1e-2, verbose: bool = False, params: str = HMM_PARAMS,
                 init_params: str = HMM_PARAMS, implementation: str = "log", n_init: int = 1,
                 backend: Any = "local", num_workers: int | None = None,
                 precision: str = "float64", n_workers: int | None = None):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.min_covar = min_covar
        self.init = init
        self.startprob_prior = startprob_prior
        self.transmat_prior = transmat_prior
        self.means_prior = means_prior
        self.means_weight = means_weight
        self.covars_prior = covars_prior
        self.covars_weight = covars_weight
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

    @property
    def covars_(self) -> np.ndarray:
        """The covariance of every state, shape (n_components, n_features, n_features)."""
        d = self._n_features()
        stored = _stored_covars(self._covars_, self.covariance_type, self.n_components, d)
        return _full_covars(stored, self.covariance_type, self.n_components, d)

    @covars_.setter
    def covars_(self, value: Any) -> None:
        self._covars_ = np.array(value, dtype=np.float64)

    def _stored_name(self, letter: str) -> str:
        return "_covars_" if letter == "c" else self._attributes[letter]

    def _n_features(self) -> int:
        return int(np.shape(self.means_)[-1]) if hasattr(self, "means_") else 1

    def _validated(self, X: Any, reset: bool) -> np.ndarray:
        X = validate_data(self, X, dtype=np.float64, reset=reset)
        if hasattr(self, "means_") and not reset and X.shape[1] != self._n_features():
            raise ValueError(f"X has {X.shape[1]} features, but the model's means_ have "
                             f"{self._n_features()}")
        return X

    def _emission_rules(self) -> dict[str, Rule]:
        return {"covariance_type": rule(lambda v: v in HMM_COVARIANCE_TYPES,
                                    f"one of {list(HMM_COVARIANCE_TYPES)}"),
                "reg_covar": rule(_is_nonneg, "a finite number >= 0"),
                "min_covar": rule(_is_nonneg, "a finite number >= 0"), "init": _INIT,
                "means_prior": _PRIOR, "means_weight": _PRIOR, "covars_prior": _PRIOR,
                "covars_weight": _PRIOR}

    def _recipe_start(self, rows: list[Any], seed: int,
                      given: Mapping[str, np.ndarray]) -> HiddenMarkovDistribution | None:
        """hmmlearn's start: k-means centres (10 runs) as the means, the rows' covariance
        plus ``min_covar`` as every state's covariance (spherical: the mean of its entries)."""
        if self.init != "hmmlearn":
            return None
        X = np.concatenate(rows)
        start, transitions = self._recipe_chain(np.random.RandomState(seed), given)
        means = KMeans(n_clusters=self.n_components, random_state=seed, n_init=10).fit(
            X).cluster_centers_
        cv, n = _data_covariance(X, self.min_covar), self.n_components
        stored = {"spherical": np.full(n, cv.mean()), "diag": np.tile(np.diag(cv), (n, 1)),
                  "tied": cv, "full": np.tile(cv, (n, 1, 1))}[self.covariance_type]
        return HiddenMarkovDistribution(_emissions_from(means, stored, self.covariance_type),
                                        start, transitions)

    def _emission_estimators(self, d: int) -> list[Estimator]:
        """Each state's Gaussian with its part of hmmlearn's priors, in the core options'
        convention (:class:`~mixfold.families._gaussian_prior.GaussianPrior`)."""
        s, kind = self.n_components, self.covariance_type
        means = _prior_array(self.means_prior, (s, d), "means_prior", self)
        weights = _prior_array(self.means_weight, (s,), "means_weight", self)
        covariance_weight = _prior_array(self.covars_weight, (s,), "covars_weight", self)
        if kind in ("diag", "spherical"):
            scatter = _prior_array(self.covars_prior, (s, d), "covars_prior", self)
            extra = np.maximum(covariance_weight - 1, 0)
        else:
            shape = (d, d) if kind == "tied" else (s, d, d)
            scatter = _prior_array(self.covars_prior, shape, "covars_prior", self)
            scatter = np.broadcast_to(scatter, (s, d, d))  # tied: the group's first counts
            extra = np.maximum(covariance_weight - d, 0)
        return [_gaussian(kind, self.reg_covar, mean_prior=means[k], mean_weight=weights[k],
                          covariance_prior=scatter[k], covariance_weight=extra[k])
                for k in range(s)]

    def _emissions(self) -> list[Any]:
        means = np.asarray(self.means_, dtype=np.float64).reshape(self.n_components, -1)
        stored = _stored_covars(self._covars_, self.covariance_type, self.n_components,
                                means.shape[1])
        return _emissions_from(means, stored, self.covariance_type)

    def _given_emission_part(self, letter: str, d: int) -> np.ndarray:
        s = self.n_components
        if letter == "m":
            means = np.asarray(self.means_, dtype=np.float64)
            if means.shape != (s, d):
                raise ValueError(f"GaussianHMM: means_ must have shape {(s, d)}, got "
                                 f"{means.shape}")
            return means
        stored = _stored_covars(self._covars_, self.covariance_type, s, d)
        bare = HiddenMarkovDistribution(_emissions_from(np.zeros((s, d)), stored,
                                                        self.covariance_type),
                                        np.full(s, 1 / s), np.full((s, s), 1 / s))
        return _parts_of(bare, "c")["c"]

    def _emission_free_parameters(self, d: int) -> dict[str, int]:
        s = self.n_components
        covariance = {"spherical": s, "diag": s * d, "tied": d * (d + 1) // 2,
                      "full": s * d * (d + 1) // 2}[self.covariance_type]
        return {"m": s * d, "c": covariance}

    def _set_emissions(self, model: HiddenMarkovDistribution) -> None:
        self.means_ = np.array([e.mu for e in model.emissions])
        self._covars_ = _stored_from(model.emissions, self.covariance_type)


class CategoricalHMM(_HiddenMarkovWrapper):
    """A hidden Markov model of symbols 0..n_features-1, hmmlearn's ``CategoricalHMM`` fitted
    by mixfold's EM: ``X`` is an integer array of shape (n_samples, 1), ``lengths`` as in
    :class:`GaussianHMM`, whose methods, monitor and ``params`` / ``init_params`` it shares
    (letters of "ste": start probabilities, transitions, emission probabilities). Fitted (or
    set by hand): ``startprob_``, ``transmat_``, ``emissionprob_`` (n_components,
    n_features); ``n_features`` (None: the largest symbol seen + 1, set by ``fit``).
    hmmlearn's Dirichlet priors ``startprob_prior``, ``transmat_prior`` and
    ``emissionprob_prior`` (a number or (n_components, n_features)); ``pseudo_count`` adds to
    the first two, ``emission_pseudo_count`` to the third.

    >>> import numpy as np
    >>> h = CategoricalHMM(2)
    >>> h.startprob_, h.transmat_ = np.array([0.6, 0.4]), np.array([[0.7, 0.3], [0.4, 0.6]])
    >>> h.emissionprob_ = np.array([[0.1, 0.4, 0.5], [0.6, 0.3, 0.1]])
    >>> log_prob, states = h.decode([[0], [1], [2]])
    >>> round(float(np.exp(log_prob)), 5), states.tolist()
    (0.01344, [1, 0, 0])
    """

    _attributes = {"s": "startprob_", "t": "transmat_", "e": "emissionprob_"}

    def __init__(self, n_components: int = 1, *, startprob_prior: Any = 1.0,
                 transmat_prior: Any = 1.0, emissionprob_prior: Any = 1.0,
                 n_features: int | None = None,
                 pseudo_count: float = 0.0, emission_pseudo_count: float = 0.0,
                 algorithm: str = "viterbi", random_state: Any = None, n_iter: int = 100,
                 tol: float = 1e-2, verbose: bool = False, params: str = "ste",
                 init_params: str = "ste", implementation: str = "log", n_init: int = 1,
                 backend: Any = "local", num_workers: int | None = None,
                 precision: str = "float64", n_workers: int | None = None):
        self.n_components = n_components
        self.startprob_prior = startprob_prior
        self.transmat_prior = transmat_prior
        self.emissionprob_prior = emissionprob_prior
        self.n_features = n_features
        self.pseudo_count = pseudo_count
        self.emission_pseudo_count = emission_pseudo_count
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

    def _n_features(self) -> int:
        if self.n_features is not None:
            return int(self.n_features)
        return int(np.shape(self.emissionprob_)[-1])

    def _validated(self, X: Any, reset: bool) -> np.ndarray:
        X = validate_data(self, X, dtype=None, reset=reset)
        if X.shape[1] != 1 or X.dtype.kind not in "iu" and not (
                X.dtype.kind == "f" and np.array_equal(X, np.round(X))):
            raise ValueError(f"CategoricalHMM: X must be integer symbols of shape "
                             f"(n_samples, 1), got {X.dtype} of shape {X.shape}")
        X = X.astype(np.int64)
        if X.min() < 0:
            raise ValueError(f"CategoricalHMM: symbols must be >= 0, got {int(X.min())}")
        if reset and self.n_features is None:
            self.n_features = int(X.max()) + 1  # hmmlearn sets it from the data
        if X.max() >= self._n_features():
            raise ValueError(f"CategoricalHMM: symbol {int(X.max())} is not among the "
                             f"n_features={self._n_features()} symbols 0..{self._n_features() - 1}")
        return X

    def _items(self, rows: np.ndarray) -> Any:
        return rows[:, 0]

    def _emission_rules(self) -> dict[str, Rule]:
        return {"n_features": rule(lambda v: v is None or integer(1).accepts(v),
                               "None or an integer >= 1"),
                "emission_pseudo_count": rule(_is_nonneg, "a finite number >= 0"),
                "emissionprob_prior": _PRIOR}

    def _check(self) -> None:
        super()._check()
        if hasattr(self, "emissionprob_"):
            width = self.n_features if self.n_features is not None else \
                np.shape(self.emissionprob_)[-1]
            _probabilities(self.emissionprob_, (self.n_components, width), "emissionprob_",
                           "CategoricalHMM")

    def _emission_estimators(self, d: int) -> list[Estimator]:
        """Each state's categorical with its row of ``emissionprob_prior`` (a Dirichlet
        concentration), ``emission_pseudo_count`` added."""
        s, f = self.n_components, self._n_features()
        prior = _prior_array(self.emissionprob_prior, (s, f), "emissionprob_prior", self)
        return [CategoricalEstimator(levels=list(range(f)),
                                     prior=row + self.emission_pseudo_count) for row in prior]

    def _emissions(self) -> list[Any]:
        probs = _probabilities(self.emissionprob_, (self.n_components, self._n_features()),
                               "emissionprob_", "CategoricalHMM")
        return [CategoricalDistribution(p, levels=list(range(p.size))) for p in probs]

    def _given_emission_part(self, letter: str, d: int) -> np.ndarray:
        return _probabilities(self.emissionprob_, (self.n_components, self._n_features()),
                              "emissionprob_", "CategoricalHMM")

    def _emission_free_parameters(self, d: int) -> dict[str, int]:
        return {"e": self.n_components * (self._n_features() - 1)}

    def _set_emissions(self, model: HiddenMarkovDistribution) -> None:
        self.emissionprob_ = np.array([e.probs for e in model.emissions])


class MultinomialHMM(_HiddenMarkovWrapper):
    """A hidden Markov model of count vectors, hmmlearn's ``MultinomialHMM`` fitted by
    mixfold's EM: ``X`` is an integer array of shape (n_samples, n_features), row t the counts
    of ``n_trials`` draws among n_features symbols; ``lengths``, methods, monitor and
    ``params`` / ``init_params`` ("ste") as :class:`CategoricalHMM`'s. ``n_trials``: the draws
    per row, an integer, or None (``fit`` sets it to the rows' totals, as hmmlearn does);
    ``sample`` needs one integer. Fitted (or set by hand): ``startprob_``, ``transmat_``,
    ``emissionprob_`` (n_components, n_features).

    >>> import numpy as np
    >>> h = MultinomialHMM(2, n_trials=5)
    >>> h.startprob_, h.transmat_ = np.array([0.6, 0.4]), np.array([[0.8, 0.2], [0.2, 0.8]])
    >>> h.emissionprob_ = np.array([[0.5, 0.3, 0.1, 0.1], [0.1, 0.1, 0.4, 0.4]])
    >>> X, states = h.sample(4, random_state=0)
    >>> X.shape, bool((X.sum(axis=1) == 5).all())
    ((4, 4), True)
    """

    _attributes = {"s": "startprob_", "t": "transmat_", "e": "emissionprob_"}

    def __init__(self, n_components: int = 1, *, startprob_prior: Any = 1.0,
                 transmat_prior: Any = 1.0, n_trials: Any = None,
                 pseudo_count: float = 0.0, emission_pseudo_count: float = 0.0,
                 algorithm: str = "viterbi", random_state: Any = None, n_iter: int = 100,
                 tol: float = 1e-2, verbose: bool = False, params: str = "ste",
                 init_params: str = "ste", implementation: str = "log", n_init: int = 1,
                 backend: Any = "local", num_workers: int | None = None,
                 precision: str = "float64", n_workers: int | None = None):
        self.n_components = n_components
        self.startprob_prior = startprob_prior
        self.transmat_prior = transmat_prior
        self.n_trials = n_trials
        self.pseudo_count = pseudo_count
        self.emission_pseudo_count = emission_pseudo_count
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

    def _n_features(self) -> int:
        if hasattr(self, "emissionprob_"):
            return int(np.shape(self.emissionprob_)[-1])
        return int(self.n_features_in_)

    def _validated(self, X: Any, reset: bool) -> np.ndarray:
        X = _whole_counts(self, X, reset)
        totals = X.sum(axis=1)
        if reset and self.n_trials is None:
            self.n_trials = totals  # hmmlearn sets it from the data
        elif np.ndim(self.n_trials) == 0 and self.n_trials is not None \
                and (totals != self.n_trials).any():
            row = int(np.flatnonzero(totals != self.n_trials)[0])
            raise ValueError(f"MultinomialHMM: row {row} counts {int(totals[row])} draws, "
                             f"n_trials is {self.n_trials}")
        return X

    def _items(self, rows: np.ndarray) -> Any:
        """Count vectors as the multinomial's {symbol: count} rows."""
        return [{j: int(c) for j, c in zip(np.flatnonzero(r), r[r > 0])} for r in rows]

    def _sampled_rows(self, values: Any) -> np.ndarray:
        counts = np.zeros((len(values), self._n_features()), dtype=np.int64)
        for i, bag in enumerate(values):  # the sampler's {symbol: count} rows
            counts[i, list(bag)] = list(bag.values())
        return counts

    def _emission_rules(self) -> dict[str, Rule]:
        return {"emission_pseudo_count": rule(_is_nonneg, "a finite number >= 0")}

    def _check(self) -> None:
        super()._check()
        if hasattr(self, "emissionprob_"):
            probs = np.asarray(self.emissionprob_, dtype=np.float64)
            width = probs.shape[-1] if probs.ndim == 2 else -1  # not 2-D: refused below
            _probabilities(probs, (self.n_components, width), "emissionprob_", "MultinomialHMM")

    def _emission_estimator(self, d: int) -> Estimator:
        return MultinomialEstimator(levels=list(range(d)),
                                    pseudo_count=self.emission_pseudo_count)

    def _emissions(self) -> list[Any]:
        probs = _probabilities(self.emissionprob_, (self.n_components, self._n_features()),
                               "emissionprob_", "MultinomialHMM")
        trials = int(self.n_trials) if np.ndim(self.n_trials) == 0 and \
            self.n_trials is not None else 1
        return [MultinomialDistribution(p, levels=list(range(p.size)), trials=trials)
                for p in probs]

    def sample(self, n_samples: int = 1, random_state: Any = None,
               currstate: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`GaussianHMM.sample`; every row counts ``n_trials`` draws (an integer)."""
        if not integer(0).accepts(self.n_trials):
            raise ValueError(f"MultinomialHMM: sampling needs n_trials to be one integer, got "
                             f"{self.n_trials!r}")
        return super().sample(n_samples, random_state, currstate)

    def _given_emission_part(self, letter: str, d: int) -> np.ndarray:
        return _probabilities(self.emissionprob_, (self.n_components, d), "emissionprob_",
                              "MultinomialHMM")

    def _emission_free_parameters(self, d: int) -> dict[str, int]:
        return {"e": self.n_components * (d - 1)}

    def _set_emissions(self, model: HiddenMarkovDistribution) -> None:
        self.emissionprob_ = np.array([e.probs for e in model.emissions])


class PoissonHMM(_HiddenMarkovWrapper):
    """A hidden Markov model of independent Poisson counts, hmmlearn's ``PoissonHMM`` fitted
    by mixfold's EM: ``X`` is an integer array of shape (n_samples, n_features); ``lengths``,
    methods, monitor and ``params`` / ``init_params`` ("stl": start probabilities, transitions,
    rates) as :class:`GaussianHMM`'s. Fitted (or set by hand): ``startprob_``, ``transmat_``,
    ``lambdas_`` (n_components, n_features). hmmlearn's priors: ``startprob_prior``,
    ``transmat_prior`` (Dirichlet) and ``lambdas_prior``, ``lambdas_weight`` (a Gamma prior in
    hmmlearn's convention, ``(lambdas_prior + sum post * x) / (lambdas_weight + n)``, broadcast
    to (n_components, n_features) as its arithmetic broadcasts them). Difference: ``n`` is the
    state's own posterior mass (the conjugate update); hmmlearn's code takes every state's.

    >>> import numpy as np
    >>> h = PoissonHMM(2)
    >>> h.startprob_, h.transmat_ = np.array([0.6, 0.4]), np.array([[0.7, 0.3], [0.4, 0.6]])
    >>> h.lambdas_ = np.array([[3.1, 1.4, 4.5], [1.6, 5.3, 0.1]])
    >>> X, states = h.sample(2000, random_state=0)
    >>> fit = PoissonHMM(2, random_state=0).fit(X)
    >>> bool(np.allclose(np.sort(fit.lambdas_[:, 1]), [1.4, 5.3], atol=0.3))
    True
    """

    _attributes = {"s": "startprob_", "t": "transmat_", "l": "lambdas_"}

    def __init__(self, n_components: int = 1, *, startprob_prior: Any = 1.0,
                 transmat_prior: Any = 1.0, lambdas_prior: Any = 0.0, lambdas_weight: Any = 0.0,
                 pseudo_count: float = 0.0,
                 algorithm: str = "viterbi", random_state: Any = None, n_iter: int = 100,
                 tol: float = 1e-2, verbose: bool = False, params: str = "stl",
                 init_params: str = "stl", implementation: str = "log", n_init: int = 1,
                 backend: Any = "local", num_workers: int | None = None,
                 precision: str = "float64", n_workers: int | None = None):
        self.n_components = n_components
        self.startprob_prior = startprob_prior
        self.transmat_prior = transmat_prior
        self.lambdas_prior = lambdas_prior
        self.lambdas_weight = lambdas_weight
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

    def _n_features(self) -> int:
        if hasattr(self, "lambdas_"):
            return int(np.shape(self.lambdas_)[-1])
        return int(self.n_features_in_)

    def _validated(self, X: Any, reset: bool) -> np.ndarray:
        return _whole_counts(self, X, reset)

    def _rates(self, d: int) -> np.ndarray:
        rates = np.asarray(self.lambdas_, dtype=np.float64)
        if rates.shape != (self.n_components, d) or not (rates > 0).all():
            raise ValueError(f"PoissonHMM: lambdas_ must be positive rates of shape "
                             f"{(self.n_components, d)}, got shape {rates.shape}")
        return rates

    def _check(self) -> None:
        super()._check()
        if hasattr(self, "lambdas_"):
            rates = np.asarray(self.lambdas_, dtype=np.float64)
            self._rates(rates.shape[-1] if rates.ndim == 2 else -1)

    def _emission_rules(self) -> dict[str, Rule]:
        return {"lambdas_prior": _PRIOR, "lambdas_weight": _PRIOR}

    def _emission_estimators(self, d: int) -> list[Estimator]:
        """Each state's independent Poisson counts with its part of hmmlearn's Gamma prior
        (``lambdas_prior`` the shape, ``lambdas_weight`` the rate)."""
        s = self.n_components
        shape = _prior_array(self.lambdas_prior, (s, d), "lambdas_prior", self)
        rate = _prior_array(self.lambdas_weight, (s, d), "lambdas_weight", self)
        return [CompositeEstimator([PoissonEstimator(prior_shape=a, prior_rate=b)
                                    for a, b in zip(shapes, rates)])
                for shapes, rates in zip(shape, rate)]

    def _emissions(self) -> list[Any]:
        return [_poissons(r) for r in self._rates(self._n_features())]

    def _given_emission_part(self, letter: str, d: int) -> np.ndarray:
        return self._rates(d)

    def _emission_free_parameters(self, d: int) -> dict[str, int]:
        return {"l": self.n_components * d}

    def _set_emissions(self, model: HiddenMarkovDistribution) -> None:
        self.lambdas_ = _parts_of(model, "l")["l"]


class GMMHMM(_HiddenMarkovWrapper):
    """A hidden Markov model whose states emit a mixture of ``n_mix`` Gaussians, hmmlearn's
    ``GMMHMM`` fitted by mixfold's EM: ``X`` and ``lengths`` as :class:`GaussianHMM`'s, whose
    methods and monitor it shares; ``params`` / ``init_params`` letters of "stmcw" (start,
    transitions, means, covariances, mixture weights). ``covariance_type`` within each state's
    mixture: "diag", "full", "spherical" or "tied" (one covariance shared by a state's
    components). Fitted (or set by hand), hmmlearn's shapes: ``weights_`` (n_components, n_mix),
    ``means_`` (n_components, n_mix, n_features), ``covars_`` (spherical (n_components, n_mix),
    diag (n_components, n_mix, n_features), full (n_components, n_mix, n_features,
    n_features), tied (n_components, n_features, n_features)). hmmlearn's priors with its
    defaults and meaning: ``startprob_prior``, ``transmat_prior``, ``weights_prior``
    (Dirichlet), ``means_prior`` / ``means_weight`` (Normal), ``covars_prior`` /
    ``covars_weight`` (Wishart for full and tied, inverse Gamma for diag and spherical; None:
    hmmlearn's defaults for the type), translated into the core estimators' options
    (``_emission_estimators``); ``min_covar``, ``init`` and ``n_init`` as
    :class:`GaussianHMM`'s. Differences: the M-step is exact EM (hmmlearn's takes the
    covariances about the E-step's means and leaves ``means_prior`` out of the means).

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = np.concatenate([rng.normal(-3, 1, (200, 1)), rng.normal(3, 1, (200, 1))])
    >>> gmm = GMMHMM(2, n_mix=2, random_state=0).fit(X, [100, 100, 100, 100])
    >>> gmm.means_.shape, gmm.covars_.shape, np.allclose(gmm.weights_.sum(axis=1), 1)
    ((2, 2, 1), (2, 2, 1), True)
    """

    _attributes = {"s": "startprob_", "t": "transmat_", "m": "means_", "c": "covars_",
                   "w": "weights_"}

    def __init__(self, n_components: int = 1, n_mix: int = 1, *, covariance_type: str = "diag",
                 min_covar: float = 1e-3, startprob_prior: Any = 1.0,
                 transmat_prior: Any = 1.0, weights_prior: Any = 1.0, means_prior: Any = 0.0,
                 means_weight: Any = 0.0, covars_prior: Any = None, covars_weight: Any = None,
                 init: str = "hmmlearn", reg_covar: float = 1e-6, pseudo_count: float = 0.0,
                 algorithm: str = "viterbi", random_state: Any = None, n_iter: int = 100,
                 tol: float = 1e-2, verbose: bool = False, params: str = "stmcw",
                 init_params: str = "stmcw", implementation: str = "log", n_init: int = 1,
                 backend: Any = "local", num_workers: int | None = None,
                 precision: str = "float64", n_workers: int | None = None):
        self.n_components = n_components
        self.n_mix = n_mix
        self.covariance_type = covariance_type
        self.min_covar = min_covar
        self.init = init
        self.startprob_prior = startprob_prior
        self.transmat_prior = transmat_prior
        self.weights_prior = weights_prior
        self.means_prior = means_prior
        self.means_weight = means_weight
        self.covars_prior = covars_prior
        self.covars_weight = covars_weight
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

    def _n_features(self) -> int:
        return int(np.shape(self.means_)[-1]) if hasattr(self, "means_") else \
            int(self.n_features_in_)

    def _validated(self, X: Any, reset: bool) -> np.ndarray:
        X = validate_data(self, X, dtype=np.float64, reset=reset)
        if hasattr(self, "means_") and not reset and X.shape[1] != self._n_features():
            raise ValueError(f"X has {X.shape[1]} features, but the model's means_ have "
                             f"{self._n_features()}")
        return X

    def _emission_rules(self) -> dict[str, Rule]:
        optional = rule(lambda v: v is None or _is_prior(v),
                        "None or a finite number or an array of finite numbers")
        return {"n_mix": integer(1),
                "covariance_type": rule(lambda v: v in HMM_COVARIANCE_TYPES,
                                    f"one of {list(HMM_COVARIANCE_TYPES)}"),
                "reg_covar": rule(_is_nonneg, "a finite number >= 0"),
                "min_covar": rule(_is_nonneg, "a finite number >= 0"), "init": _INIT,
                "weights_prior": _PRIOR, "means_prior": _PRIOR, "means_weight": _PRIOR,
                "covars_prior": optional, "covars_weight": optional}

    def _recipe_start(self, rows: list[Any], seed: int,
                      given: Mapping[str, np.ndarray]) -> HiddenMarkovDistribution | None:
        """hmmlearn's start: k-means clusters of the rows, one per state, each split by
        k-means into ``n_mix`` centres (a cluster of fewer rows: centres drawn around the
        clusters' mean), equal weights, the rows' covariance plus ``min_covar`` for every
        component (spherical: the mean of its entries)."""
        if self.init != "hmmlearn":
            return None
        X = np.concatenate(rows)
        s, m, d = self.n_components, self.n_mix, X.shape[1]
        rng = np.random.RandomState(seed)
        start, transitions = self._recipe_chain(rng, given)
        main = KMeans(n_clusters=s, random_state=seed, n_init=10)
        labels = main.fit_predict(X)
        centre = main.cluster_centers_.mean(axis=0)
        cv = _data_covariance(X, self.min_covar)
        means = [KMeans(n_clusters=m, random_state=seed, n_init=10).fit(
            X[labels == k]).cluster_centers_ if (labels == k).sum() >= m
            else rng.multivariate_normal(centre, cv, size=m) for k in range(s)]
        own = {"spherical": np.full((m, d), cv.mean()), "diag": np.tile(np.diag(cv), (m, 1)),
               "tied": np.tile(cv, (m, 1, 1)), "full": np.tile(cv, (m, 1, 1))}
        emissions = [_gaussian_mixture(np.full(m, 1 / m), c, own[self.covariance_type])
                     for c in means]
        return HiddenMarkovDistribution(emissions, start, transitions)

    def _emission_estimators(self, d: int) -> list[Estimator]:
        """Each state's mixture with its part of hmmlearn's priors, translated into the core
        options' convention (``(covariance_prior + S) / (n + covariance_weight)``): full,
        ``covars_prior`` transposed and ``covars_weight + n_features + 2``; diag, ``2 *
        covars_weight`` and ``2 * covars_prior + 3``; spherical, ``2 * covars_weight /
        n_features`` and ``1 + 2 (covars_prior + 1) / n_features``; tied (the state's
        components share one covariance), ``covars_prior`` transposed and ``covars_weight +
        n_mix + n_features + 1``. ``covars_prior`` / ``covars_weight`` None: hmmlearn's
        defaults for the type."""
        s, m, kind = self.n_components, self.n_mix, self.covariance_type
        alpha, beta = _gmm_covars_defaults(kind, m, d)
        alpha = alpha if self.covars_prior is None else self.covars_prior
        beta = beta if self.covars_weight is None else self.covars_weight
        weights = _prior_array(self.weights_prior, (s, m), "weights_prior", self)
        means = _prior_array(self.means_prior, (s, m, d), "means_prior", self)
        lambdas = _prior_array(self.means_weight, (s, m), "means_weight", self)
        if kind == "full":
            scatter = np.swapaxes(_prior_array(alpha, (s, m, d, d), "covars_prior", self), 2, 3)
            extra = _prior_array(beta, (s, m), "covars_weight", self) + d + 2
        elif kind == "tied":
            psi = np.swapaxes(_prior_array(alpha, (s, d, d), "covars_prior", self), 1, 2)
            scatter = np.repeat(psi[:, None], m, axis=1)  # a state's first component counts
            nu = _prior_array(beta, (s,), "covars_weight", self) + m + d + 1
            extra = np.repeat(nu[:, None], m, axis=1)
        elif kind == "diag":
            scatter = 2 * _prior_array(beta, (s, m, d), "covars_weight", self)
            extra = 2 * _prior_array(alpha, (s, m, d), "covars_prior", self) + 3
        else:
            share = 2 * _prior_array(beta, (s, m), "covars_weight", self) / d
            scatter = np.repeat(share[:, :, None], d, axis=2)
            extra = 1 + 2 * (_prior_array(alpha, (s, m), "covars_prior", self) + 1) / d
        return [MixtureEstimator([_gaussian(kind, self.reg_covar, mean_prior=means[i, j],
                                            mean_weight=lambdas[i, j],
                                            covariance_prior=scatter[i, j],
                                            covariance_weight=extra[i, j])
                                  for j in range(m)], weights_prior=weights[i])
                for i in range(s)]

    def _emissions(self) -> list[Any]:
        s, k = self.n_components, self.n_mix
        means = np.asarray(self.means_, dtype=np.float64)
        d = means.shape[-1]
        if means.shape != (s, k, d):
            raise ValueError(f"GMMHMM: means_ must have shape {(s, k, d)}, got {means.shape}")
        weights = _probabilities(self.weights_, (s, k), "weights_", "GMMHMM")
        covs = self._given_emission_part("c", d)
        return [_gaussian_mixture(w, m, c) for w, m, c in zip(weights, means, covs)]

    def _given_emission_part(self, letter: str, d: int) -> np.ndarray:
        s, k = self.n_components, self.n_mix
        if letter == "w":
            return _probabilities(self.weights_, (s, k), "weights_", "GMMHMM")
        if letter == "m":
            means = np.asarray(self.means_, dtype=np.float64)
            if means.shape != (s, k, d):
                raise ValueError(f"GMMHMM: means_ must have shape {(s, k, d)}, got "
                                 f"{means.shape}")
            return means
        stored = np.asarray(self.covars_, dtype=np.float64)
        shape = {"spherical": (s, k), "diag": (s, k, d), "full": (s, k, d, d),
                 "tied": (s, d, d)}[self.covariance_type]
        if stored.shape != shape:
            raise ValueError(f"GMMHMM: covars_ must have shape {shape} for covariance_type="
                             f"{self.covariance_type!r}, got {stored.shape}")
        return np.array([_mixture_covars(c, self.covariance_type, k, d) for c in stored])

    def _emission_free_parameters(self, d: int) -> dict[str, int]:
        s, k = self.n_components, self.n_mix
        covariance = {"spherical": s * k, "diag": s * k * d, "tied": s * d * (d + 1) // 2,
                      "full": s * k * d * (d + 1) // 2}[self.covariance_type]
        return {"m": s * k * d, "c": covariance, "w": s * (k - 1)}

    def _set_emissions(self, model: HiddenMarkovDistribution) -> None:
        parts = _parts_of(model, "wmc")
        self.weights_, self.means_ = parts["w"], parts["m"]
        self.covars_ = np.array([_stored_mixture_covars(c, self.covariance_type)
                                 for c in parts["c"]])


def _gmm_covars_defaults(kind: str, n_mix: int, d: int) -> tuple[float, float]:
    """hmmlearn's GMMHMM defaults of (covars_prior, covars_weight) for ``kind``: those that
    make its M-step (nearly) the maximum likelihood."""
    return {"full": (0.0, -(1.0 + d + 1.0)), "tied": (0.0, -(n_mix + d + 1.0)),
            "diag": (-1.5, 0.0), "spherical": (-(n_mix + 2.0) / 2.0, 0.0)}[kind]


def _mixture_covars(stored: np.ndarray, kind: str, k: int, d: int) -> np.ndarray:
    """One state's stored covariances (hmmlearn's form) as its components' own."""
    if kind == "full":
        return stored
    if kind == "tied":
        return np.repeat(stored[None], k, axis=0)
    return stored if kind == "diag" else np.repeat(stored[:, None], d, axis=1)


def _stored_mixture_covars(own: np.ndarray, kind: str) -> np.ndarray:
    """One state's components' covariances in hmmlearn's stored form."""
    if kind in ("full", "diag"):
        return own
    if kind == "tied":
        return own.mean(axis=0)  # a tied state's components already share one matrix
    return own.mean(axis=1)


def _whole_counts(est: BaseEstimator, X: Any, reset: bool) -> np.ndarray:
    """``X`` validated as counts (whole numbers >= 0, of any numeric dtype), as int64."""
    X = validate_data(est, X, dtype=None, reset=reset)
    name = type(est).__name__
    if X.dtype.kind not in "iu" and not (X.dtype.kind == "f" and np.array_equal(X, np.round(X))):
        raise ValueError(f"{name}: X must be integer counts, got {X.dtype}")
    X = X.astype(np.int64)
    if X.min() < 0:
        raise ValueError(f"{name}: counts must be >= 0, got {int(X.min())}")
    return X
