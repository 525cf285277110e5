"""Missing values: missing with probability p_missing, else drawn from an inner family.

Which raw values are missing is :mod:`mixfold.families._missing_markers`; how the rows are read
(a presence mask, the present values encoded by the inner family) is
:mod:`mixfold.families._optional_encoding`; what Optional writes like the other wrappers of one
child (zero inflation, censoring) is :mod:`mixfold.families._wrapper`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from mixfold.decomposition import DecompAxis, Decomposition, ReductionOp
from mixfold.errors import ParameterError
from mixfold.families._hooks import (ChildFold, ChildScore, FoldChildren, FoldsChildren,
                                     ScoreChildren, ScoresChildren, fold_serially,
                                     score_serially)
from mixfold.families._missing_markers import DEFAULT_MISSING, MissingMarkers
from mixfold.families._optional_encoding import OptionalEncoded, OptionalEncoder
from mixfold.families._protocol import Distribution, Encoder, Estimator, InitRandom, family
from mixfold.families._wrapper import (WrapperAccumulator, WrapperDistribution,
                                       WrapperEstimator, smoothed_share)
from mixfold.options import number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["OptionalDistribution", "OptionalEstimator", "OptionalAccumulator", "OptionalEncoder",
           "OptionalEncoded", "MissingMarkers"]


# ---------------------------------------------------------------------------------------------
# Distribution


@family("Optional")
class OptionalDistribution(ScoresChildren, WrapperDistribution):
    """A value that is missing with probability ``p_missing``, else drawn from ``inner``.

    log p(missing) = log p_missing; log p(x) = log(1 - p_missing) + log p_inner(x). ``missing``
    says which raw values are missing (default: ``None`` and float NaN). The sampler writes NaN
    for a missing value of a float inner family (an array), else ``None`` (or, when ``None`` is
    not a marker, NaN or the first other marker).

    >>> from mixfold import GaussianDistribution
    >>> d = OptionalDistribution(GaussianDistribution(0.0, 1.0), 0.25)
    >>> round(d.log_density(None), 6), round(d.log_density(0.0), 6)
    (-1.386294, -1.206621)
    >>> d.sampler(1).sample(4).round(3).tolist()
    [0.905, 0.446, nan, -0.537]
    """

    #: model files may leave this out (``to_dict`` does when it holds the default markers);
    #: given, it must have this shape
    optional_params = {"missing": {"none": True, "nan": True, "values": []}}

    parameter_coordinates = {"inner": "part", "p_missing": "unit", "missing": "fixed"}
    json_forms = {"missing": (MissingMarkers.to_json, MissingMarkers.from_json)}

    def __init__(self, inner: Distribution, p_missing: float, *,
                 missing: MissingMarkers | Sequence[Any] = DEFAULT_MISSING):
        if not isinstance(inner, Distribution):
            raise ParameterError(f"inner must be a Distribution, got {type(inner).__name__}")
        p = float(p_missing)
        if not (0.0 <= p <= 1.0):
            raise ParameterError(f"p_missing must be in [0, 1], got {p_missing!r}")
        self.inner = inner
        self.p_missing = p
        self.missing = missing if isinstance(missing, MissingMarkers) else MissingMarkers(missing)
        with np.errstate(divide="ignore"):
            self.log_p_missing = float(np.log(p))
            self.log_p_present = float(np.log1p(-p))

    def seq_log_density(self, enc: OptionalEncoded, precision: Precision = FLOAT64) -> np.ndarray:
        return self.score_children(enc, precision, score_serially)

    def score_children(self, enc: OptionalEncoded, precision: Precision,
                       score: ScoreChildren) -> np.ndarray:
        """The present values' log-densities (from ``score``) scattered among the missing."""
        return self._scatter(enc, score([ChildScore(0, self.inner, enc.inner)], precision)[0])

    def _scatter(self, enc: OptionalEncoded, inner_ll: np.ndarray) -> np.ndarray:
        out = np.full(enc.n_rows, self.log_p_missing)
        out[enc.present] = self.log_p_present + inner_ll
        return out

    def encoder(self) -> OptionalEncoder:
        return OptionalEncoder(self.inner.encoder(), self.missing)

    def _sample(self, n: int, rng: np.random.Generator) -> Any:
        present = rng.random(n) >= self.p_missing
        drawn = self.inner._sample(int(present.sum()), rng)
        if isinstance(drawn, np.ndarray) and drawn.ndim == 1 and drawn.dtype.kind == "f" \
                and self.missing.nan:
            out = np.full(n, np.nan)
            out[present] = drawn
            return out
        rows: list[Any] = [self.missing.sample_marker()] * n
        for i, v in zip(np.flatnonzero(present).tolist(), drawn):
            rows[i] = v.item() if isinstance(v, np.generic) else v
        return rows

    def decomposition(self) -> Decomposition:
        """SEQUENCE-like: the present values are rows of ``inner`` (a fraction ``1 - p_missing``
        of this node's rows), recursed into and never split here, as a sequence's items are."""
        return Decomposition(DecompAxis.SEQUENCE, ReductionOp.REPLICATE, units=(self.inner,),
                             child_roles=("inner",), unit_rows=1.0 - self.p_missing,
                             row_work=1.0, param_bytes=24)


# ---------------------------------------------------------------------------------------------
# Accumulator and estimator


class OptionalAccumulator(FoldsChildren, WrapperAccumulator):
    """Statistics: the weighted missing and present rows
    (:class:`~mixfold.families._wrapper.WrapperCounts`: ``own``, ``child``), then the inner
    accumulator's, which sees the present rows only, with their weights.
    """

    def _present_weights(self, enc: OptionalEncoded, weights: np.ndarray) -> np.ndarray:
        present_w = weights[enc.present]
        self.counts += (weights[~enc.present].sum(), present_w.sum())
        return present_w

    def seq_update(self, enc: OptionalEncoded, weights: np.ndarray, model: OptionalDistribution,
                   precision: Precision = FLOAT64) -> np.ndarray | None:
        return self.fold_children(enc, weights, model, precision, fold_serially)

    def fold_children(self, enc: OptionalEncoded, weights: np.ndarray,
                      model: OptionalDistribution, precision: Precision,
                      fold: FoldChildren) -> np.ndarray | None:
        """The present values folded by ``fold``; their log-densities scattered."""
        inner_ll = fold([ChildFold(0, self.child, enc.inner, self._present_weights(enc, weights),
                                   model.inner)], precision)[0]
        return None if inner_ll is None else model._scatter(enc, inner_ll)

    def seq_initialize(self, enc: OptionalEncoded, weights: np.ndarray, rng: InitRandom) -> None:
        self.child.seq_initialize(enc.inner, self._present_weights(enc, weights),
                                  rng.child("inner"))


class OptionalEstimator(WrapperEstimator):
    """Estimator of a value that may be missing: p_missing and the ``inner`` family.

    p_missing = (missing + pseudo_count) / (total + 2 pseudo_count), with the counts weighted;
    a node with no weight at all gets p_missing = 0.5. ``missing`` lists the raw values that mean
    "missing" (``None``, float NaN, or any hashable value such as ``"NA"``).

    >>> import mixfold
    >>> from mixfold import GaussianEstimator
    >>> rows = [1.0, None, 3.0, float("nan")]
    >>> fit = mixfold.optimize(rows, OptionalEstimator(GaussianEstimator()), progress=False)
    >>> fit.p_missing, fit.inner.mu
    (0.5, 2.0)
    """

    option_rules = {"pseudo_count": number(0)}
    model_class = OptionalDistribution
    accumulator_class = OptionalAccumulator

    def __init__(self, inner: Estimator, missing: MissingMarkers | Sequence[Hashable] =
                 DEFAULT_MISSING, pseudo_count: float = 0.0, keys: str | None = None):
        if not isinstance(inner, Estimator):
            raise TypeError(f"inner must be an Estimator, got {type(inner).__name__}")
        self.check_options(pseudo_count=pseudo_count)
        self.inner = inner
        self.missing = missing if isinstance(missing, MissingMarkers) else MissingMarkers(missing)
        self.pseudo_count = float(pseudo_count)
        self.keys = keys

    def encoder(self) -> OptionalEncoder:
        return OptionalEncoder(self.inner.encoder(), self.missing)

    def bind(self, encoder: Encoder) -> OptionalEstimator:
        if not isinstance(encoder, OptionalEncoder):
            raise ValueError(f"an optional estimator needs an OptionalEncoder, got {encoder!r}")
        return OptionalEstimator(self.inner.bind(encoder.inner), encoder.missing,
                                 self.pseudo_count, self.keys)

    def initial_guess(self, sample: OptionalEncoded, weights: np.ndarray,
                      rng: InitRandom) -> OptionalDistribution:
        present_w = weights[sample.present]
        inner = self.inner.initial_guess(sample.inner, present_w, rng.child("inner"))
        missing, present = float(weights[~sample.present].sum()), float(present_w.sum())
        # smoothed, so a row kind the sample lacks does not start at probability zero
        smoothing = 0.005 * max(missing + present, 1.0)
        return OptionalDistribution(inner, smoothed_share(missing, present,
                                                          self.pseudo_count + smoothing),
                                    missing=self.missing)

    def __repr__(self) -> str:
        return f"OptionalEstimator({self.inner!r}, {self.missing!r})"
