"""scikit-learn-style estimators for the common cases (needs scikit-learn: ``mixfold[sklearn]``).

- :class:`GaussianMixture`: like ``sklearn.mixture.GaussianMixture`` (full or diagonal
  covariances) on an array of shape (n_samples, n_features);
- :class:`GaussianHMM`: like ``hmmlearn.hmm.GaussianHMM``: rows of one or more sequences stacked
  into one array, ``lengths`` saying where each sequence ends;
- :class:`MixedTypeClustering`: clusters of a pandas DataFrame of mixed column types, each column
  modelled by the family its type suggests (:mod:`mixfold.io.tables`), overridable per column.

All fit with mixfold's EM (any backend, any precision band) and keep the fitted mixfold model as
``model_``; ``get_params`` / ``set_params``, cloning and pickling work as in scikit-learn.
All three pass scikit-learn's estimator checks (the two that assume rows are independent do
not apply to an HMM; tests/test_sklearn.py says which).

>>> import numpy as np
>>> X = np.vstack([np.random.default_rng(0).normal(m, 0.5, size=(100, 2)) for m in (0, 5)])
>>> gm = GaussianMixture(2, random_state=0).fit(X)
>>> sorted(round(m) for m in gm.means_[:, 0])
[0, 5]
>>> int((gm.predict(X[:100]) == gm.predict(X[:1])[0]).sum())
100
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

try:
    from sklearn.base import BaseEstimator, DensityMixin
    from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError("mixfold.sklearn needs scikit-learn >= 1.6: pip install "
                      "\"mixfold[sklearn]\"") from err

import mixfold
from mixfold.backends import BACKENDS
from mixfold.families import (DiagonalGaussianEstimator, Distribution, Estimator,
                              HiddenMarkovEstimator, MixtureEstimator,
                              MultivariateGaussianEstimator)
from mixfold.fit import int_at_least
from mixfold.io.readers import _is_arrow_table, _is_pandas_frame
from mixfold.io.tables import record_spec
from mixfold.precision import BANDS
from mixfold.spec import estimator_from_spec

__all__ = ["GaussianMixture", "GaussianHMM", "MixedTypeClustering"]

COVARIANCE_TYPES = ("full", "diag")


def _check_params(est: BaseEstimator, rules: Mapping[str, tuple[Any, str]]) -> None:
    """Check hyper-parameters against ``rules`` (name -> (test, what is expected)), once, at fit."""
    for name, (ok, expected) in rules.items():
        value = getattr(est, name)
        if not ok(value):
            raise ValueError(f"{type(est).__name__}: {name} must be {expected}, got {value!r}")


def _is_nonneg(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and np.isfinite(v) and v >= 0


_COMMON_RULES: dict[str, tuple[Any, str]] = {
    "max_iter": (lambda v: int_at_least(v, 1), "an integer >= 1"),
    "tol": (_is_nonneg, "a finite number >= 0"),
    "backend": (lambda v: v in BACKENDS or not isinstance(v, str),
                f"one of {list(BACKENDS)} or an engine object"),
    "precision": (lambda v: v in BANDS, f"one of {list(BANDS)}"),
}

_MIXTURE_RULES = {**_COMMON_RULES, "n_init": (lambda v: int_at_least(v, 1), "an integer >= 1")}


def _seed(random_state: Any) -> int:
    """An EM seed from a scikit-learn ``random_state`` (None means the fixed seed 0)."""
    if random_state is None:
        return 0
    if isinstance(random_state, numbers.Integral):
        return int(random_state)
    return int(check_random_state(random_state).randint(0, 2**31 - 1))


def _gaussian(covariance_type: str, reg_covar: float) -> Estimator:
    if covariance_type == "full":
        return MultivariateGaussianEstimator(reg_covar=reg_covar)
    return DiagonalGaussianEstimator(reg_covar=reg_covar)


class _MixtureMethods:
    """predict / predict_proba / score_samples / score over a fitted ``model_`` (a mixture)."""

    model_: Any

    def _encoded(self, X: Any) -> Any:
        raise NotImplementedError

    def _fit_model(self, X: Any, estimator: Estimator) -> Distribution:
        """The best of ``n_init`` fits (seeds seed, seed + 1, ...), by mean log-likelihood."""
        model = None
        seed = _seed(self.random_state)
        for i in range(self.n_init):
            candidate = mixfold.optimize(X, estimator, max_iter=self.max_iter, tol=self.tol,
                                         seed=seed + i, backend=self.backend,
                                         num_workers=self.n_workers, precision=self.precision,
                                         progress=False)
            if model is None or (candidate.fit_result.final_log_likelihood
                                 > model.fit_result.final_log_likelihood):
                model = candidate
        result = model.fit_result
        self.model_ = model
        self.weights_ = model.weights.copy()
        self.converged_ = result.converged
        self.n_iter_ = result.iterations
        self.lower_bound_ = result.final_log_likelihood
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


class GaussianMixture(_MixtureMethods, DensityMixin, BaseEstimator):
    """A mixture of ``n_components`` Gaussians with ``"full"`` or ``"diag"`` covariances.

    Parameters as in scikit-learn (``reg_covar`` is added to the covariance diagonals; the start
    is k-means++ seeded from ``random_state``, None meaning seed 0; the best of ``n_init``
    starts is kept), plus mixfold's ``backend``,
    ``n_workers`` and ``precision`` of the E-step. Fitted: ``weights_``, ``means_``,
    ``covariances_``, ``converged_``, ``n_iter_``, ``lower_bound_`` (mean log-likelihood per
    row), ``log_likelihood_trace_`` and the mixfold model ``model_``.

    >>> import numpy as np
    >>> X = np.random.default_rng(1).normal(size=(500, 3))
    >>> gm = GaussianMixture(1, covariance_type="diag").fit(X)
    >>> gm.covariances_.shape, round(gm.score(X), 1)
    ((1, 3), -4.3)
    """

    def __init__(self, n_components: int = 1, *, covariance_type: str = "full",
                 tol: float = 1e-6, reg_covar: float = 1e-6, max_iter: int = 100,
                 n_init: int = 1, random_state: Any = None, backend: Any = "local",
                 n_workers: int | None = None, precision: str = "float64"):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.tol = tol
        self.reg_covar = reg_covar
        self.max_iter = max_iter
        self.n_init = n_init
        self.random_state = random_state
        self.backend = backend
        self.n_workers = n_workers
        self.precision = precision

    def _rules(self) -> dict[str, tuple[Any, str]]:
        return {"n_components": (lambda v: int_at_least(v, 1), "an integer >= 1"),
                "covariance_type": (lambda v: v in COVARIANCE_TYPES,
                                    f"one of {list(COVARIANCE_TYPES)}"),
                "reg_covar": (_is_nonneg, "a finite number >= 0"), **_MIXTURE_RULES}

    def fit(self, X: Any, y: Any = None) -> GaussianMixture:
        """Fit to ``X``, array of shape (n_samples, n_features); ``y`` is ignored."""
        _check_params(self, self._rules())
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        if X.shape[0] < self.n_components:
            raise ValueError(f"Expected n_samples >= n_components but got n_components = "
                             f"{self.n_components}, n_samples = {X.shape[0]}")
        component = _gaussian(self.covariance_type, self.reg_covar)
        model = self._fit_model(X, MixtureEstimator([component] * self.n_components))
        self.means_ = np.array([c.mu for c in model.components])
        if self.covariance_type == "full":
            self.covariances_ = np.array([c.cov for c in model.components])
        else:
            self.covariances_ = np.array([c.sigma2 for c in model.components])
        return self

    def _encoded(self, X: Any) -> Any:
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self.model_.encoder().encode(X)

    def sample(self, n_samples: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """``n_samples`` rows drawn from the fitted mixture and their components, as scikit-learn
        does: (X of shape (n_samples, n_features), y of shape (n_samples,)), sorted by component.
        """
        check_is_fitted(self)
        if not int_at_least(n_samples, 1):
            raise ValueError(f"n_samples must be an integer >= 1, got {n_samples!r}")
        rng = check_random_state(self.random_state)
        counts = rng.multinomial(n_samples, self.weights_)
        gen = np.random.default_rng(rng.randint(0, 2**31 - 1))
        parts = [np.asarray(c.sampler(gen).sample(int(n)), dtype=np.float64).reshape(n, -1)
                 for c, n in zip(self.model_.components, counts)]
        labels = np.repeat(np.arange(self.n_components), counts)
        return np.vstack(parts), labels


class MixedTypeClustering(_MixtureMethods, DensityMixin, BaseEstimator):
    """Clusters of a pandas DataFrame of mixed column types: a mixture of ``n_clusters`` records.

    Each column gets the family its type suggests (floats Gaussian, non-negative integers
    Poisson, text categorical, booleans Bernoulli, any column with missing values wrapped in
    Optional; :mod:`mixfold.io.tables`); ``families`` overrides some, column -> spec node
    (``{"income": "log_gaussian"}``). ``pseudo_count`` keeps empty clusters and unseen levels at a
    positive probability. Arrays and Arrow tables are read as DataFrames (array columns are
    named ``x0, x1, ...``). Fitted: ``spec_`` (the spec that was fitted), ``weights_``,
    ``columns_``, ``converged_``, ``n_iter_``, ``lower_bound_``, ``model_``.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": [21.0, 23, 22, 61, 64, 60],
    ...                    "plan": ["a", "a", "a", "b", "b", "b"]})
    >>> mtc = MixedTypeClustering(2, random_state=0).fit(df)
    >>> labels = mtc.predict(df); bool(labels[0] != labels[-1]) and len(set(labels[:3])) == 1
    True
    """

    def __init__(self, n_clusters: int = 2, *, families: Mapping[str, Any] | None = None,
                 pseudo_count: float = 1.0, tol: float = 1e-6, max_iter: int = 100,
                 n_init: int = 1, random_state: Any = None, backend: Any = "local",
                 n_workers: int | None = None, precision: str = "float64"):
        self.n_clusters = n_clusters
        self.families = families
        self.pseudo_count = pseudo_count
        self.tol = tol
        self.max_iter = max_iter
        self.n_init = n_init
        self.random_state = random_state
        self.backend = backend
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
            return X
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
        _check_params(self, {"n_clusters": (lambda v: int_at_least(v, 1), "an integer >= 1"),
                             "pseudo_count": (_is_nonneg, "a finite number >= 0"),
                             "families": (lambda v: v is None or isinstance(v, Mapping),
                                          "None or a mapping column -> spec"),
                             **_MIXTURE_RULES})
        frame = self._frame(X, reset=True)
        if len(frame) < self.n_clusters:
            raise ValueError(f"Expected n_samples >= n_clusters but got n_clusters = "
                             f"{self.n_clusters}, n_samples = {len(frame)}")
        spec = {"mixture": record_spec(frame, self.families), "k": self.n_clusters,
                "pseudo_count": float(self.pseudo_count)}
        estimator = estimator_from_spec(spec)
        self.columns_ = [str(c) for c in frame.columns]
        self.spec_ = spec
        self._fit_model(frame, estimator)
        return self

    def _encoded(self, X: Any) -> Any:
        check_is_fitted(self)
        return self.model_.encoder().encode(self._frame(X, reset=False))

    def sample(self, n_samples: int = 1) -> tuple[Any, np.ndarray]:
        """``n_samples`` rows drawn from the fitted model as a DataFrame, and their clusters."""
        import pandas as pd

        check_is_fitted(self)
        rng = check_random_state(self.random_state)
        counts = rng.multinomial(n_samples, self.weights_)
        gen = np.random.default_rng(rng.randint(0, 2**31 - 1))
        rows = [r for c, n in zip(self.model_.components, counts)
                for r in c.sampler(gen).sample(int(n))]
        labels = np.repeat(np.arange(self.n_clusters), counts)
        return pd.DataFrame(rows, columns=self.columns_), labels


class GaussianHMM(BaseEstimator):
    """A hidden Markov model with Gaussian emissions, on stacked sequences (hmmlearn's layout).

    ``X`` is an array of shape (n_samples, n_features) holding one or more sequences one after
    another, and ``lengths`` (keyword; default: one sequence) their lengths, summing to
    n_samples. ``fit(X, lengths=...)``, ``predict`` (Viterbi states), ``predict_proba``
    (posterior state probabilities), ``score`` (total log-likelihood of the sequences, as
    hmmlearn), ``score_samples`` (hmmlearn's pair: total log-likelihood and the posteriors),
    ``sample(n)`` (one sequence of ``n`` rows and its states). Fitted: ``startprob_``,
    ``transmat_``, ``means_``, ``covars_``, ``converged_``, ``n_iter_``, ``model_``.

    >>> import numpy as np
    >>> from mixfold import DiagonalGaussianDistribution as DG, HiddenMarkovDistribution
    >>> truth = HiddenMarkovDistribution([DG([-2.0], [1.0]), DG([2.0], [1.0])], [0.5, 0.5],
    ...                                  [[0.9, 0.1], [0.2, 0.8]])
    >>> X = np.vstack(truth.sampler(0, sample_length=50).sample(20)).reshape(-1, 1)
    >>> hmm = GaussianHMM(2, random_state=0).fit(X, lengths=[50] * 20)
    >>> order = np.argsort(hmm.means_[:, 0])
    >>> hmm.transmat_[np.ix_(order, order)].round(1).tolist()
    [[0.9, 0.1], [0.2, 0.8]]
    """

    def __init__(self, n_components: int = 1, *, covariance_type: str = "diag",
                 tol: float = 1e-6, reg_covar: float = 1e-6, max_iter: int = 100,
                 pseudo_count: float = 0.0, random_state: Any = None, backend: Any = "local",
                 n_workers: int | None = None, precision: str = "float64"):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.tol = tol
        self.reg_covar = reg_covar
        self.max_iter = max_iter
        self.pseudo_count = pseudo_count
        self.random_state = random_state
        self.backend = backend
        self.n_workers = n_workers
        self.precision = precision

    def _sequences(self, X: Any, lengths: Any, reset: bool) -> list[np.ndarray]:
        X = validate_data(self, X, dtype=np.float64, reset=reset)
        if lengths is None:
            return [X]
        lengths = np.asarray(lengths)
        if lengths.ndim != 1 or lengths.dtype.kind not in "iu" or (lengths < 1).any() \
                or lengths.sum() != X.shape[0]:
            raise ValueError(f"lengths must be integers >= 1 summing to n_samples = {X.shape[0]},"
                             f" got {lengths.tolist() if lengths.ndim == 1 else lengths!r}")
        return np.split(X, np.cumsum(lengths)[:-1])

    def fit(self, X: Any, y: Any = None, lengths: Any = None) -> GaussianHMM:
        """Fit to the sequences stacked in ``X`` (``lengths`` as keyword); ``y`` is ignored."""
        _check_params(self, {"n_components": (lambda v: int_at_least(v, 1), "an integer >= 1"),
                             "covariance_type": (lambda v: v in COVARIANCE_TYPES,
                                                 f"one of {list(COVARIANCE_TYPES)}"),
                             "reg_covar": (_is_nonneg, "a finite number >= 0"),
                             "pseudo_count": (_is_nonneg, "a finite number >= 0"),
                             **_COMMON_RULES})
        rows = self._sequences(X, lengths, reset=True)
        n = sum(len(r) for r in rows)
        if n < self.n_components:
            raise ValueError(f"Expected n_samples >= n_components but got n_components = "
                             f"{self.n_components}, n_samples = {n}")
        emission = _gaussian(self.covariance_type, self.reg_covar)
        estimator = HiddenMarkovEstimator([emission] * self.n_components, self.pseudo_count)
        model = mixfold.optimize(rows, estimator, max_iter=self.max_iter, tol=self.tol,
                                 seed=_seed(self.random_state), backend=self.backend,
                                 num_workers=self.n_workers, precision=self.precision,
                                 progress=False)
        result = model.fit_result
        self.model_ = model
        self.startprob_ = model.initial.copy()
        self.transmat_ = model.transitions.copy()
        self.means_ = np.array([e.mu for e in model.emissions])
        self.covars_ = np.array([e.cov if self.covariance_type == "full" else e.sigma2
                                 for e in model.emissions])
        self.converged_ = result.converged
        self.n_iter_ = result.iterations
        self.lower_bound_ = result.final_log_likelihood
        return self

    def _encoded(self, X: Any, lengths: Any) -> Any:
        check_is_fitted(self)
        return self.model_.encoder().encode(self._sequences(X, lengths, reset=False))

    def predict(self, X: Any, lengths: Any = None) -> np.ndarray:
        """The Viterbi state of every row, int array of shape (n_samples,)."""
        enc = self._encoded(X, lengths)
        return self.model_.seq_viterbi(enc)

    def predict_proba(self, X: Any, lengths: Any = None) -> np.ndarray:
        """Posterior state probabilities of every row, array of shape (n_samples, n_components)."""
        enc = self._encoded(X, lengths)
        return self.model_.seq_posterior(enc)

    def score(self, X: Any, y: Any = None, lengths: Any = None) -> float:
        """Total log-likelihood of the sequences in ``X`` (hmmlearn's convention)."""
        enc = self._encoded(X, lengths)
        return float(self.model_.seq_log_density(enc).sum())

    def score_samples(self, X: Any, lengths: Any = None) -> tuple[float, np.ndarray]:
        """hmmlearn's pair: the total log-likelihood and the posterior state probabilities."""
        enc = self._encoded(X, lengths)
        return float(self.model_.seq_log_density(enc).sum()), self.model_.seq_posterior(enc)

    def sample(self, n_samples: int = 1, random_state: Any = None) -> tuple[np.ndarray,
                                                                             np.ndarray]:
        """One sequence of ``n_samples`` rows from the fitted model and its hidden states:
        (X of shape (n_samples, n_features), states of shape (n_samples,))."""
        check_is_fitted(self)
        if not int_at_least(n_samples, 1):
            raise ValueError(f"n_samples must be an integer >= 1, got {n_samples!r}")
        rng = check_random_state(self.random_state if random_state is None else random_state)
        states = np.empty(n_samples, dtype=np.int64)
        states[0] = rng.choice(self.n_components, p=self.startprob_)
        for t in range(1, n_samples):  # the chain itself: one draw per step
            states[t] = rng.choice(self.n_components, p=self.transmat_[states[t - 1]])
        gen = np.random.default_rng(rng.randint(0, 2**31 - 1))
        X = np.empty((n_samples, self.means_.shape[1]))
        for k, emission in enumerate(self.model_.emissions):
            at = np.flatnonzero(states == k)
            if at.size:
                X[at] = np.asarray(emission.sampler(gen).sample(at.size)).reshape(at.size, -1)
        return X, states
