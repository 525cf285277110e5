"""Latent Dirichlet allocation over bags of words, fitted by variational EM.

A row is one document: a list of tokens, a ``{word: count}`` mapping, or a string (split into
lower-case word tokens). The vocabulary is fixed at encode time; a word outside it raises, or
is dropped with ``unknown="ignore"``.

The model is Blei, Ng & Jordan's (2003) with Dirichlet topics: ``topics`` (K, V) are the
variational Dirichlet parameters lambda of the topics (``topic_word`` normalises them), ``alpha``
the Dirichlet prior of the document-topic proportions, ``eta`` that of the topics. The E-step
solves each document's variational parameters gamma by the fixed point of Blei et al.,
vectorised over the documents of a chunk (sparse counts); its statistics are the expected
topic-word counts, the weighted sum of E[log theta] (what the ``alpha`` update needs), the
document weight and the word weight: a fixed-size payload. The M-step sets
``lambda = eta + expected counts`` (scikit-learn's batch update) and, when ``alpha`` is learnt,
Minka's fixed point for a Dirichlet.

A row's log-density is its evidence lower bound (ELBO): the document's own terms plus its words'
share of the topics' term ``E[log p(beta | eta) - log q(beta | lambda)]``, spread over the words
the topics were fitted on; summed over the training corpus it is the whole ELBO, which batch
variational EM never lowers (each document solved to convergence). Inside a mixture the share
of a component moves with its responsibilities, so there the fit's trace is a bound that EM
climbs only approximately. :meth:`LDADistribution.perplexity` is scikit-learn's:
``exp(-(documents' bound + topics' term) / words)``.

>>> import mixfold
>>> docs = [["apple", "pear"] * 5, ["cat", "dog"] * 5] * 20
>>> est = mixfold.LDAEstimator(2, alpha=0.5)
>>> m = mixfold.optimize(docs, est, max_iter=30, progress=False)
>>> sorted(sorted(w for w, _ in m.top_words(2)[k]) for k in range(2))
[['apple', 'pear'], ['cat', 'dog']]
>>> m.transform([["cat", "dog", "cat"]]).max().round(2)
np.float64(0.87)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from mixfold.decomposition import DecompAxis, Decomposition, ReductionOp
from mixfold.errors import ParameterError
from mixfold.families._bag_of_words import UNKNOWN, BagOfWordsEncoded, BagOfWordsEncoder
from mixfold.families._dirichlet_fixed_point import learn_alpha
from mixfold.families._hooks import FoldsRanges, RunRanges, ScoresRanges, whole_range
from mixfold.families._lda_fixed_point import (Posterior, add_expected_counts, doc_bound, pieces,
                                               solve, topic_table)
from mixfold.families._protocol import (Accumulator, AccumulatorFactory, Distribution, Encoded,
                                        Encoder, Estimator, InitRandom, family)
from mixfold.families._scipy import digamma
from mixfold.families._topic_queries import TopicQueries
from mixfold.precision import BandSupportError
from mixfold.options import integer, none_or, number, one_of
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["LDADistribution", "LDAEstimator", "LDAAccumulator", "BagOfWordsEncoder",
           "BagOfWordsEncoded", "TopicUnit", "learn_alpha"]

#: Inner iterations a typical document takes at the default tolerance (the planner's work).
PLANNED_DOC_ITERATIONS = 20


def _native(precision: Precision) -> None:
    if precision.dtype != np.float64:
        raise BandSupportError(f"precision {precision!r} cannot run LDA: its variational E-step "
                               f"runs in float64 only")


# ---------------------------------------------------------------------------------------------
# The distribution


class TopicUnit:
    """One topic of an LDA model as the planner sees it: a unit of the TOPIC axis holding a row
    of lambda and of the E-step's table (``2 * 8 * V`` bytes)."""

    __slots__ = ("index", "n_words", "work")

    def __init__(self, index: int, n_words: int, work: float):
        self.index, self.n_words, self.work = index, n_words, work

    def decomposition(self) -> Decomposition:
        return Decomposition.atomic(row_work=self.work, param_bytes=16 * self.n_words)


@family("LDA", kind="lda")
class LDADistribution(TopicQueries, Distribution, ScoresRanges):
    """Latent Dirichlet allocation: ``topics`` (K, V) positive Dirichlet parameters lambda of the
    topics over the vocabulary, ``alpha`` the document-topic prior (a number or K numbers),
    ``eta`` the topic prior (default 1/K).

    ``vocabulary`` names the V words (default ``0..V-1``); ``unknown`` is the encoder's policy
    for other words. ``mean_length`` (words per document) is what the sampler draws documents'
    lengths around. ``doc_iterations`` and ``doc_tol`` bound each document's fixed point.

    >>> d = LDADistribution([[5.0, 1.0], [1.0, 5.0]], 0.5, vocabulary=["a", "b"])
    >>> d.topic_word.round(3).tolist()
    [[0.833, 0.167], [0.167, 0.833]]
    >>> round(d.log_density(["a", "a", "b"]), 4)
    -3.4523
    """

    def __init__(self, topics: Any, alpha: float | Sequence[float], eta: float | None = None,
                 vocabulary: Sequence[Any] | None = None, mean_length: float = 100.0,
                 unknown: str = "error", doc_iterations: int = 100, doc_tol: float = 1e-3):
        lam = np.array(topics, dtype=np.float64)
        if lam.ndim != 2 or lam.shape[0] < 1 or lam.shape[1] < 1:
            raise ParameterError(f"topics must be an array of shape (n_topics, n_words), got "
                                 f"shape {lam.shape}")
        if not (np.isfinite(lam).all() and (lam > 0).all()):
            raise ParameterError("topics (Dirichlet parameters) must be finite and > 0")
        k, v = lam.shape
        a = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (k,)).copy() \
            if np.ndim(alpha) == 0 else np.asarray(alpha, dtype=np.float64)
        if a.shape != (k,) or not (np.isfinite(a).all() and (a > 0).all()):
            raise ParameterError(f"alpha must be a number > 0 or {k} numbers > 0, got {alpha!r}")
        eta = 1.0 / k if eta is None else float(eta)
        if not (np.isfinite(eta) and eta > 0):
            raise ParameterError(f"eta must be a finite number > 0, got {eta!r}")
        if not (np.isfinite(mean_length) and mean_length >= 0):
            raise ParameterError(f"mean_length must be a finite number >= 0, got {mean_length!r}")
        if not (isinstance(doc_iterations, (int, np.integer)) and doc_iterations >= 1):
            raise ParameterError(f"doc_iterations must be an integer >= 1, got {doc_iterations!r}")
        if not (np.isfinite(doc_tol) and doc_tol >= 0):
            raise ParameterError(f"doc_tol must be a finite number >= 0, got {doc_tol!r}")
        self.topics = lam
        self.alpha = float(a[0]) if np.ndim(alpha) == 0 else a
        self.alpha_vector = a
        self.eta = eta
        self.vocabulary = tuple(range(v)) if vocabulary is None else tuple(vocabulary)
        if len(self.vocabulary) != v:
            raise ParameterError(f"need one word per column of topics ({v}), got "
                                 f"{len(self.vocabulary)}")
        self.mean_length = float(mean_length)
        self.unknown = unknown
        self.doc_iterations = int(doc_iterations)
        self.doc_tol = float(doc_tol)
        self._encoder = BagOfWordsEncoder(self.vocabulary, unknown)
        # the fixed point's table, held with lambda: 2 x K x V floats
        self._table, self._shift, self._topics_bound = topic_table(lam, eta)
        self._per_word = self._topics_bound / max(float(lam.sum() - k * v * eta), 1.0)

    @property
    def n_topics(self) -> int:
        return self.topics.shape[0]

    def _solved(self, enc: BagOfWordsEncoded,
                run: RunRanges) -> Iterator[tuple[int, int, BagOfWordsEncoded, Posterior]]:
        """Each piece of ``enc`` (its rows ``lo:hi``) with its documents' solved posterior."""
        for lo, hi in pieces(enc, self.n_topics):
            piece = enc.rows(lo, hi)
            yield lo, hi, piece, solve(piece, self.alpha_vector, self._table, run,
                                       self.doc_iterations, self.doc_tol)

    # --- scoring ---

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        return self.score_ranges(enc, precision, whole_range(self.n_topics))

    def score_ranges(self, enc: Encoded, precision: Precision, run: RunRanges) -> np.ndarray:
        """Each document's ELBO plus its words' share of the topics' term, shape (n_rows,)."""
        _native(precision)
        out = np.empty(enc.n_rows)
        for lo, hi, piece, post in self._solved(enc, run):
            out[lo:hi] = doc_bound(piece, post, self.alpha_vector, self._shift) \
                + piece.lengths() * self._per_word
        return out

    # --- protocol ---

    def encoder(self) -> BagOfWordsEncoder:
        return self._encoder

    def estimator(self, **options: Any) -> LDAEstimator:
        options.setdefault("n_topics", self.n_topics)
        # a learnt (per-topic) alpha is learnt again by the refit
        options.setdefault("alpha", None if isinstance(self.alpha, np.ndarray) else self.alpha)
        options.setdefault("eta", self.eta)
        options.setdefault("vocabulary", self.vocabulary)
        options.setdefault("unknown", self.unknown)
        options.setdefault("doc_iterations", self.doc_iterations)
        options.setdefault("doc_tol", self.doc_tol)
        return LDAEstimator(**options)

    def _sample(self, n: int, rng: np.random.Generator) -> list[dict[Any, int]]:
        theta = rng.dirichlet(self.alpha_vector, size=n)
        beta = np.array([rng.dirichlet(row) for row in self.topics])
        lengths = rng.poisson(self.mean_length, size=n)
        counts = rng.multinomial(lengths, theta @ beta)
        return [{self.vocabulary[j]: int(row[j]) for j in np.flatnonzero(row)} for row in counts]

    def n_parameters(self) -> int:
        k, v = self.topics.shape
        return k * (v - 1) + (k if isinstance(self.alpha, np.ndarray) else 0)

    def _params(self) -> dict[str, Any]:
        return {"topics": self.topics.tolist(),
                "alpha": self.alpha.tolist() if isinstance(self.alpha, np.ndarray)
                else self.alpha,
                "eta": self.eta, "vocabulary": list(self.vocabulary),
                "mean_length": self.mean_length, "unknown": self.unknown,
                "doc_iterations": self.doc_iterations, "doc_tol": self.doc_tol}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> LDADistribution:
        vocabulary = p["vocabulary"]
        if not isinstance(vocabulary, list) or not all(type(w) in (str, int) for w in vocabulary):
            raise ValueError("an LDA vocabulary must be a list of strings and ints")
        return cls(p["topics"], p["alpha"], p["eta"], vocabulary, p["mean_length"],
                   p["unknown"], p["doc_iterations"], p["doc_tol"])

    def decomposition(self) -> Decomposition:
        """The TOPIC axis: topics are the units (each holds its row of lambda and of the E-step's
        table); the normalisation over topics of every word couples them centrally, as a
        mixture's responsibilities couple its components."""
        k, v = self.topics.shape
        per_topic = 2.0 * max(self.mean_length, 1.0) * PLANNED_DOC_ITERATIONS
        units = tuple(TopicUnit(i, v, per_topic) for i in range(k))
        return Decomposition(DecompAxis.TOPIC, ReductionOp.LOGSUMEXP_RESPONSIBILITY, units=units,
                             row_work=max(self.mean_length, 1.0) * PLANNED_DOC_ITERATIONS,
                             param_bytes=8 * (v + 2 * k))


# ---------------------------------------------------------------------------------------------
# Statistics


class LDAAccumulator(Accumulator, FoldsRanges):
    """Statistics: expected topic-word counts (K, V), the weighted sum of E[log theta] (K,),
    and (document weight, word weight)."""

    def __init__(self, n_topics: int, n_words: int, keys: str | None = None):
        self.keys = keys
        self.topic_words = np.zeros((n_topics, n_words))
        self.log_theta = np.zeros(n_topics)
        self.sums = np.zeros(2)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.topic_words, self.log_theta, self.sums]

    def seq_update(self, enc: Encoded, weights: np.ndarray, model: LDADistribution,
                   precision: Precision = FLOAT64) -> np.ndarray:
        return self.fold_ranges(enc, weights, model, precision, whole_range(model.n_topics))

    def fold_ranges(self, enc: Encoded, weights: np.ndarray, model: LDADistribution,
                    precision: Precision, run: RunRanges) -> np.ndarray:
        _native(precision)
        out = np.empty(enc.n_rows)
        for lo, hi, piece, post in model._solved(enc, run):
            w, lengths, gamma = weights[lo:hi], piece.lengths(), post.gamma
            out[lo:hi] = doc_bound(piece, post, model.alpha_vector, model._shift) \
                + lengths * model._per_word
            self.log_theta += w @ (digamma(gamma) - digamma(gamma.sum(axis=1))[:, None])
            add_expected_counts(self.topic_words, model._table, piece, w, post, run)
            self.sums += (w.sum(), w @ lengths)
        return out

    def seq_initialize(self, enc: Encoded, weights: np.ndarray, rng: InitRandom) -> None:
        # seeded random document-topic proportions, as if each document were a soft mixture
        k = self.topic_words.shape[0]
        u = rng.row_uniform(enc, k) + 1e-3
        u /= u.sum(axis=1, keepdims=True)
        doc = enc.doc_of_nonzero()
        for t in range(k):
            self.topic_words[t] += np.bincount(enc.words, weights=enc.counts * (weights * u[:, t])
                                               [doc], minlength=self.topic_words.shape[1])
        self.log_theta += weights.sum() * (digamma(1.0) - digamma(float(k)))
        self.sums += (weights.sum(), weights @ enc.lengths())


class LDAEstimator(Estimator):
    """M-step for :class:`LDADistribution` with ``n_topics`` topics.

    ``alpha``: a number fixes a symmetric document-topic prior; ``None`` learns an asymmetric one
    (Minka's fixed point, from 1/K). ``eta``: the topic prior added to the expected counts
    (default 1/K, as scikit-learn). ``vocabulary=None`` learns the words when the data is
    encoded; ``unknown`` is the encoder's policy for words outside it. ``doc_iterations`` and
    ``doc_tol`` bound each document's fixed point in the E-step (scikit-learn's defaults: an
    E-step stopped that early may lower the bound by a hair near the optimum, which the fit
    reports as a decrease; ``doc_tol=1e-8`` with a few thousand ``doc_iterations`` solves each
    document fully, and batch EM then never lowers it). ``n_documents`` scales the
    expected counts to a corpus of that many documents (Hoffman, Blei & Bach's D, for
    :class:`~mixfold.OnlineEM` over a corpus read in blocks, possibly several times); ``None``
    keeps them as folded (batch EM).

    Online variational Bayes (Hoffman et al. 2010) is the stepwise EM of
    :class:`~mixfold.OnlineEM`: the running statistics per document are the exponentially
    weighted average of the blocks' expected counts, and the M-step sets
    ``lambda = eta + D * average``, Hoffman's update with the step sizes of ``OnlineEM``.

    >>> import mixfold
    >>> docs = [["apple", "pear"] * 5, ["cat", "dog"] * 5] * 50
    >>> online = mixfold.OnlineEM(LDAEstimator(2, alpha=0.5, n_documents=100), init_rows=20)
    >>> for i in range(0, 100, 20):
    ...     online = online.partial_fit(docs[i:i + 20])
    >>> sorted(sorted(w for w, _ in online.model.top_words(2)[k]) for k in range(2))
    [['apple', 'pear'], ['cat', 'dog']]
    """

    distribution_class = LDADistribution

    option_rules = {"n_topics": integer(1), "alpha": none_or(number(0, above=True)),
                    "eta": none_or(number(0, above=True)), "unknown": one_of(*UNKNOWN),
                    "doc_iterations": integer(1), "doc_tol": number(0),
                    "n_documents": none_or(number(0, above=True))}

    def __init__(self, n_topics: int, alpha: float | None = None, eta: float | None = None,
                 vocabulary: Sequence[Any] | None = None, unknown: str = "error",
                 doc_iterations: int = 100, doc_tol: float = 1e-3,
                 n_documents: float | None = None, keys: str | None = None):
        self.check_options(n_topics=n_topics, alpha=alpha, eta=eta, unknown=unknown,
                           doc_iterations=doc_iterations, doc_tol=doc_tol,
                           n_documents=n_documents)
        self.n_topics = int(n_topics)
        self.alpha = None if alpha is None else float(alpha)
        self.eta = eta
        self.vocabulary = None if vocabulary is None else tuple(vocabulary)
        self.unknown = unknown
        self.doc_iterations = int(doc_iterations)
        self.doc_tol = float(doc_tol)
        self.n_documents = None if n_documents is None else float(n_documents)
        self.keys = keys

    def encoder(self) -> BagOfWordsEncoder:
        return BagOfWordsEncoder(self.vocabulary, self.unknown)

    def bind(self, encoder: Encoder) -> LDAEstimator:
        if not isinstance(encoder, BagOfWordsEncoder) or encoder.vocabulary is None:
            raise ValueError(f"an LDA estimator needs a fitted BagOfWordsEncoder, got {encoder!r}")
        return LDAEstimator(self.n_topics, self.alpha, self.eta, encoder.vocabulary,
                            self.unknown, self.doc_iterations, self.doc_tol, self.n_documents,
                            self.keys)

    def _vocabulary(self) -> tuple:
        if self.vocabulary is None:
            raise ValueError("LDAEstimator has no vocabulary: give vocabulary= or let optimize "
                             "learn it when it encodes the data")
        return self.vocabulary

    def accumulator_factory(self) -> AccumulatorFactory:
        v = len(self._vocabulary())
        return AccumulatorFactory(lambda: LDAAccumulator(self.n_topics, v, self.keys))

    def _model(self, topics: np.ndarray, alpha: Any, mean_length: float) -> LDADistribution:
        return LDADistribution(topics, alpha, self.eta, self._vocabulary(), mean_length,
                               self.unknown, self.doc_iterations, self.doc_tol)

    def initial_guess(self, sample: Encoded, weights: np.ndarray,
                      rng: InitRandom) -> LDADistribution:
        """Topics drawn as scikit-learn draws them (Gamma(100, 1/100) per entry, seeded),
        scaled by one plus the sample's weighted count of each word per topic, so that a
        mixture's components start from the words of the rows that seed them."""
        v = len(self._vocabulary())
        topics = rng.generator().gamma(100.0, 0.01, (self.n_topics, v))
        counts = np.bincount(sample.words, weights=sample.counts * weights[sample.doc_of_nonzero()],
                             minlength=v)
        topics *= 1.0 + counts / self.n_topics
        total = float(weights.sum())
        mean_length = float(weights @ sample.lengths()) / total if total > 0 else 100.0
        alpha = 1.0 / self.n_topics if self.alpha is None else self.alpha
        return self._model(topics, alpha, mean_length)

    def estimate(self, nobs: float, stats: Any) -> LDADistribution:
        (topic_words, log_theta, (n_docs, n_words)), _ = stats
        k = self.n_topics
        if self.alpha is not None:
            alpha: Any = self.alpha
        elif n_docs > 0:
            alpha = learn_alpha(n_docs, log_theta, np.full(k, 1.0 / k))
        else:
            alpha = np.full(k, 1.0 / k)
        mean_length = n_words / n_docs if n_docs > 0 else 100.0
        if self.n_documents is not None and n_docs > 0:
            topic_words = topic_words * (self.n_documents / n_docs)
        eta = 1.0 / k if self.eta is None else float(self.eta)  # the distribution's default
        return self._model(eta + topic_words, alpha, mean_length)

    def __repr__(self) -> str:
        return f"LDAEstimator({self.n_topics}, alpha={self.alpha!r}, eta={self.eta!r})"
