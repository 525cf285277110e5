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

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from mixfold.compute.kernels import kernels_available, lda_norm, lda_step, lda_update
from mixfold.decomposition import DecompAxis, Decomposition, ReductionOp
from mixfold.errors import DataError, DataTypeError, ParameterError
from mixfold.families._hooks import FoldsRanges, RunRanges, ScoresRanges, whole_range
from mixfold.families._scipy import csr_matrix, digamma, gammaln, polygamma
from mixfold.families._sparse import (is_count_matrix, sparse_counts, spark_rows_as_mappings,
                                      spark_vector_width)
from mixfold.families._protocol import (Accumulator, AccumulatorFactory, Distribution, Encoded,
                                        Encoder, Estimator, InitRandom, family)
from mixfold.families.categorical import _ordered_levels
from mixfold.precision import BandSupportError
from mixfold.options import integer, none_or, number, one_of
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["LDADistribution", "LDAEstimator", "LDAAccumulator", "BagOfWordsEncoder",
           "BagOfWordsEncoded", "TopicUnit"]

#: Nonzeros x topics per piece of a chunk: bounds the gathered topic columns (32 MiB each).
MAX_PIECE_CELLS = 1 << 22
#: Re-gather the iterating documents' nonzeros once they are under this share of those held.
COMPACT_BELOW = 0.75
#: Inner iterations a typical document takes at the default tolerance (the planner's work).
PLANNED_DOC_ITERATIONS = 20
_TOKEN = re.compile(r"\w+")
_UNKNOWN = ("error", "ignore")


# ---------------------------------------------------------------------------------------------
# Encoding: documents as sparse rows of word counts


class BagOfWordsEncoded(Encoded):
    """Documents as CSR rows: document ``i`` holds ``words[offsets[i]:offsets[i + 1]]`` (distinct
    word ids, increasing) with ``counts`` (float64) at the same places.

    ``offsets`` has shape (n_rows + 1,), int64, ``offsets[0] == 0``.
    """

    __slots__ = ("offsets", "words", "counts", "n_rows", "start")

    def __init__(self, offsets: np.ndarray, words: np.ndarray, counts: np.ndarray,
                 start: int = 0):
        self.offsets = offsets
        self.words = words
        self.counts = counts
        self.n_rows = int(offsets.shape[0]) - 1
        self.start = int(start)

    def doc_of_nonzero(self) -> np.ndarray:
        """The document of every nonzero, int64 array of shape (nnz,)."""
        return np.repeat(np.arange(self.n_rows, dtype=np.int64), np.diff(self.offsets))

    def lengths(self) -> np.ndarray:
        """Words per document (counts summed), float64 array of shape (n_rows,)."""
        return np.bincount(self.doc_of_nonzero(), weights=self.counts, minlength=self.n_rows)

    def rows(self, begin: int, end: int) -> BagOfWordsEncoded:
        end = min(end, self.n_rows)
        cut = self.offsets[begin:end + 1]
        lo, hi = int(cut[0]), int(cut[-1])
        return BagOfWordsEncoded(cut - lo, self.words[lo:hi], self.counts[lo:hi],
                                 self.start + begin)

    def take(self, indices: np.ndarray) -> BagOfWordsEncoded:
        indices = np.asarray(indices, dtype=np.int64)
        sizes = np.diff(self.offsets)[indices]
        offsets = np.zeros(len(indices) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        pick = np.arange(offsets[-1], dtype=np.int64) + np.repeat(
            self.offsets[indices] - offsets[:-1], sizes)
        return BagOfWordsEncoded(offsets, self.words[pick], self.counts[pick])

    @property
    def nbytes(self) -> int:
        return int(self.offsets.nbytes + self.words.nbytes + self.counts.nbytes)

    def node_sizes(self) -> list[int]:
        return [self.n_rows]

    def with_starts(self, starts: Iterator[int]) -> BagOfWordsEncoded:
        return BagOfWordsEncoded(self.offsets, self.words, self.counts, next(starts))

    @classmethod
    def concat(cls, parts: Sequence[Encoded]) -> BagOfWordsEncoded:
        sizes = np.concatenate([np.diff(p.offsets) for p in parts])
        offsets = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        return BagOfWordsEncoded(offsets, np.concatenate([p.words for p in parts]),
                                 np.concatenate([p.counts for p in parts]), parts[0].start)

    def __repr__(self) -> str:
        return f"BagOfWordsEncoded(n_rows={self.n_rows}, nnz={self.words.shape[0]})"


def _check_word(w: Any, row: int) -> Any:
    w = w.item() if isinstance(w, np.generic) else w
    if type(w) is not str and (type(w) is not int):
        raise DataTypeError(f"a word must be a string or an int (what a model file holds), got "
                            f"{w!r:.60} ({type(w).__name__})", row=row)
    return w


def _bags(values: Any) -> tuple[list, np.ndarray, np.ndarray]:
    """(every token of every row, its row, its count): rows of token lists, strings or
    ``{word: count}`` mappings."""
    tokens: list = []
    doc_sizes = np.zeros(len(values), dtype=np.int64)
    counts: list[float] = []
    for i, row in enumerate(values):
        if isinstance(row, Mapping):
            for w, c in row.items():
                c = c.item() if isinstance(c, np.generic) else c
                if isinstance(c, bool) or not isinstance(c, (int, float)) or not c >= 0 \
                        or c == float("inf"):
                    raise DataError(f"the count of word {w!r:.40} must be a finite number >= 0,"
                                    f" got {c!r:.40}", row=i)
                tokens.append(w)
                counts.append(float(c))
            doc_sizes[i] = len(row)
            continue
        if isinstance(row, str):
            row = _TOKEN.findall(row.lower())
        elif isinstance(row, np.ndarray) and row.ndim == 1:
            row = row.tolist()
        elif not isinstance(row, (list, tuple)):
            raise DataTypeError(f"a document must be a list of tokens, a string or a "
                                f"{{word: count}} mapping, got {type(row).__name__} "
                                f"{row!r:.60}", row=i)
        tokens.extend(row)
        counts.extend([1.0] * len(row))
        doc_sizes[i] = len(row)
    doc = np.repeat(np.arange(len(values), dtype=np.int64), doc_sizes)
    return tokens, doc, np.asarray(counts, dtype=np.float64)


class BagOfWordsEncoder(Encoder):
    """Maps documents to sparse word counts over a fixed vocabulary.

    ``unknown``: what a word outside the vocabulary does at encode time: ``"error"`` raises
    :class:`~mixfold.DataError` naming the row, ``"ignore"`` drops it. A ``scipy.sparse``
    document-term matrix (n_rows, V) is read as CSR, never densified: its columns are the
    words (the ``vocabulary`` of length V, else ``0 .. V-1``); so are a 2-D numeric NumPy
    array's (counts, not tokens) and Spark ML vectors (a DataFrame's vector column), row by row.

    >>> enc = BagOfWordsEncoder().fit([["b", "a", "b"], {"c": 2}])
    >>> enc.vocabulary
    ('a', 'b', 'c')
    >>> e = enc.encode([["b", "a", "b"], {"c": 2}])
    >>> e.offsets.tolist(), e.words.tolist(), e.counts.tolist()
    ([0, 2, 3], [0, 1, 2], [1.0, 2.0, 2.0])
    """

    def __init__(self, vocabulary: Sequence[Any] | None = None, unknown: str = "error"):
        if unknown not in _UNKNOWN:
            raise ValueError(f"unknown must be one of {_UNKNOWN}, got {unknown!r}")
        self.unknown = unknown
        self.vocabulary = None if vocabulary is None else tuple(vocabulary)
        if self.vocabulary is not None and len(set(self.vocabulary)) != len(self.vocabulary):
            raise ValueError("the words of a vocabulary must be distinct")

    def fit(self, values: Any) -> BagOfWordsEncoder:
        if self.vocabulary is not None:
            return self
        if is_count_matrix(values):  # a document-term matrix: the words are its columns
            return BagOfWordsEncoder(tuple(range(values.shape[1])), self.unknown)
        width = spark_vector_width(values)
        if width is not None:  # Spark vectors of counts: the words are their columns
            return BagOfWordsEncoder(tuple(range(width)), self.unknown)
        tokens, doc, _ = _bags(values)
        found: dict[Any, int] = {}  # each distinct word and where it first occurs
        for i, w in enumerate(tokens):
            try:
                found.setdefault(w, i)
            except TypeError:
                raise DataTypeError(f"a word must be a string or an int, got "
                                    f"{type(w).__name__}", row=int(doc[i])) from None
        for w, i in found.items():
            _check_word(w, int(doc[i]))
        if not found:  # nothing to learn here; merging with other shards' fits supplies it
            return self
        return BagOfWordsEncoder(_ordered_levels(list(found)), self.unknown)

    def merge(self, other: Encoder) -> BagOfWordsEncoder:
        if not isinstance(other, BagOfWordsEncoder) or other.unknown != self.unknown:
            raise ValueError(f"cannot merge encoders {self!r} and {other!r}")
        if self.vocabulary is None or other.vocabulary is None:
            return self if other.vocabulary is None else other
        if self.vocabulary == other.vocabulary:
            return self
        return BagOfWordsEncoder(
            _ordered_levels(list(dict.fromkeys(self.vocabulary + other.vocabulary))),
            self.unknown)

    def encode(self, values: Any) -> BagOfWordsEncoded:
        if self.vocabulary is None:
            raise DataError("no words to learn the vocabulary from: give vocabulary= or "
                            "documents with words")
        if is_count_matrix(values):
            csr = sparse_counts(values, len(self.vocabulary), False, "word of the vocabulary")
            return BagOfWordsEncoded(csr.offsets, csr.columns, csr.counts)
        values = spark_rows_as_mappings(values, self.vocabulary)
        n_rows = len(values)
        tokens, doc, counts = _bags(values)
        index = {w: i for i, w in enumerate(self.vocabulary)}
        try:
            ids = np.fromiter((index.get(w, -1) for w in tokens), dtype=np.int64,
                              count=len(tokens))
        except TypeError:  # an unhashable token
            bad = next(i for i, w in enumerate(tokens) if not _hashable(w))
            raise DataTypeError(f"a word must be a string or an int, got "
                                f"{type(tokens[bad]).__name__}", row=int(doc[bad])) from None
        unseen = ids < 0
        if unseen.any():
            if self.unknown == "error":
                at = int(np.flatnonzero(unseen)[0])
                shown = list(self.vocabulary[:10]) + (["..."] if len(index) > 10 else [])
                raise DataError(f"word {tokens[at]!r:.60} is not among the {len(index)} words of "
                                f"the vocabulary fixed at encode time {shown} (unknown='ignore'"
                                f" drops such words)", row=int(doc[at]))
            ids, doc, counts = ids[~unseen], doc[~unseen], counts[~unseen]
        # one nonzero per (document, word): duplicates add up, documents stay in order
        key, inverse = np.unique(doc * len(index) + ids, return_inverse=True)
        summed = np.bincount(inverse.ravel(), weights=counts, minlength=key.shape[0])
        keep = summed > 0
        key, summed = key[keep], summed[keep]
        offsets = np.zeros(n_rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(key // len(index), minlength=n_rows), out=offsets[1:])
        return BagOfWordsEncoded(offsets, key % len(index), summed)

    def __repr__(self) -> str:
        size = None if self.vocabulary is None else len(self.vocabulary)
        return f"BagOfWordsEncoder(<{size} words>, unknown={self.unknown!r})"


def _hashable(w: Any) -> bool:
    try:
        hash(w)
    except TypeError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# The variational E-step, vectorised over the documents of a piece, topics by ranges


def _exp_dirichlet(gamma: np.ndarray) -> np.ndarray:
    """exp(E[log theta]) of Dirichlet rows ``gamma`` (n, K)."""
    return np.exp(digamma(gamma) - digamma(gamma.sum(axis=1))[:, None])


def _summed(parts: list[np.ndarray]) -> np.ndarray:
    """The ranges' partial sums added in range order (one range: itself, bit for bit)."""
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


class _Posterior:
    """A piece's solved variational parameters: ``gamma`` (n, K), ``exp_theta`` (n, K) and the
    normaliser of every nonzero over the topics (shifted per word, see ``_table``)."""

    __slots__ = ("gamma", "exp_theta", "norm", "doc")

    def __init__(self, gamma: np.ndarray, exp_theta: np.ndarray, norm: np.ndarray,
                 doc: np.ndarray):
        self.gamma, self.exp_theta, self.norm, self.doc = gamma, exp_theta, norm, doc


class _FixedPoint:
    """One piece's documents iterating gamma = alpha + exp_theta * (ratio @ beta); each step
    over topics is a method of a unit range ``(a, b)``, run by a :data:`RunRanges`."""

    def __init__(self, model: LDADistribution, enc: BagOfWordsEncoded):
        n, k = enc.n_rows, model.n_topics
        self.alpha, self.counts = model.alpha_vector, enc.counts
        self.doc = enc.doc_of_nonzero()
        sizes = self.sizes = np.diff(enc.offsets)
        self.gamma = np.ones((n, k))
        self.gamma[sizes == 0] = self.alpha  # an empty document's posterior is its prior
        self.exp_theta = _exp_dirichlet(self.gamma)
        self.words, self.table = enc.words, model._table
        self.full: dict[tuple[int, int], np.ndarray] = {}
        # the documents held (a superset of those still iterating), their nonzeros and columns
        self.docs = np.flatnonzero(sizes > 0)
        self.held_nz = np.arange(enc.words.shape[0])
        self.held_sizes = sizes[self.docs]
        self.cols = self.full
        self.iterating = np.ones(self.docs.shape[0], dtype=bool)
        self.theta = self.new = self.ratio = self.keep = self.now = self.log_total = None
        # the compiled steps read each nonzero's columns once (kernels.lda_norm, lda_update);
        # the NumPy ones below stay the reference
        self.compiled = kernels_available()

    def gather(self, a: int, b: int) -> None:
        self.full[a, b] = np.ascontiguousarray(self.table[a:b, self.words].T)

    def held_norm(self, a: int, b: int) -> np.ndarray:
        return self._norm(self.theta[:, a:b], self.cols[a, b], self.held_sizes)

    def _norm(self, theta: np.ndarray, cols: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        if self.compiled:
            return lda_norm(theta, cols, sizes)
        # each document's row once per nonzero (a repeat copies blocks, a gather elements)
        return np.einsum("ik,ik->i", np.repeat(theta, sizes, axis=0), cols)

    def update(self, a: int, b: int) -> None:
        if self.compiled:
            lda_update(self.theta[:, a:b], self.cols[a, b], self.held_sizes, self.ratio,
                       self.alpha[a:b], self.new[:, a:b])
            return
        offsets = np.concatenate([[0], np.cumsum(self.held_sizes)])
        ratio = csr_matrix((self.ratio, np.arange(self.ratio.shape[0]), offsets),
                           shape=(self.held_sizes.shape[0], self.ratio.shape[0]))
        self.new[:, a:b] = self.alpha[a:b] + self.theta[:, a:b] * (ratio @ self.cols[a, b])

    def expect(self, a: int, b: int) -> None:
        self.exp_theta[self.now, a:b] = np.exp(digamma(self.gamma[self.now, a:b])
                                               - self.log_total)

    def compact(self, a: int, b: int) -> tuple[tuple[int, int], np.ndarray]:
        return (a, b), self.cols[a, b][self.keep]

    def final_norm(self, a: int, b: int) -> np.ndarray:
        return self._norm(self.exp_theta[:, a:b], self.full[a, b], self.sizes)

    def step(self, run: RunRanges, tol: float) -> bool:
        """One iteration of the held documents; whether any still iterates."""
        n_held = self.docs.shape[0]
        self.theta = self.exp_theta[self.docs]
        self.new = np.empty((n_held, self.gamma.shape[1]))
        if self.compiled and len(self.cols) == 1:  # every topic in one range: one pass
            (cols,) = self.cols.values()
            lda_step(self.theta, cols, self.held_sizes, self.counts[self.held_nz], self.alpha,
                     self.new)
        else:
            norm = _summed(run(self.held_norm))
            self.ratio = self.counts[self.held_nz] / norm  # each nonzero's count / normaliser
            run(self.update)
        iterating = self.iterating
        self.now = self.docs[iterating]
        change = np.abs(self.new[iterating] - self.gamma[self.now]).mean(axis=1)
        self.gamma[self.now] = self.new[iterating]
        self.log_total = digamma(self.gamma[self.now].sum(axis=1))[:, None]
        run(self.expect)
        iterating[iterating] = change >= tol
        if not iterating.any():
            return False
        if self.held_sizes[iterating].sum() < COMPACT_BELOW * self.held_nz.shape[0]:
            self.keep = np.repeat(iterating, self.held_sizes)
            self.docs, self.held_nz = self.docs[iterating], self.held_nz[self.keep]
            self.held_sizes = self.held_sizes[iterating]
            self.cols = dict(run(self.compact))
            self.iterating = np.ones(self.docs.shape[0], dtype=bool)
        return True


def _solve(model: LDADistribution, enc: BagOfWordsEncoded, run: RunRanges) -> _Posterior:
    """Each document's gamma by Blei et al.'s fixed point, stopped document by document when its
    mean change falls under ``model.doc_tol`` (as scikit-learn's E-step); the work over topics
    runs by ranges through ``run``, everything over all topics centrally."""
    fp = _FixedPoint(model, enc)
    run(fp.gather)
    for _ in range(model.doc_iterations if fp.docs.size else 0):
        if not fp.step(run, model.doc_tol):
            break
    return _Posterior(fp.gamma, fp.exp_theta, _summed(run(fp.final_norm)), fp.doc)


def _doc_bound(model: LDADistribution, enc: BagOfWordsEncoded, post: _Posterior) -> np.ndarray:
    """Each document's own ELBO terms (scikit-learn's ``_approx_bound`` per document)."""
    alpha, gamma = model.alpha_vector, post.gamma
    words = np.bincount(post.doc, weights=enc.counts * (np.log(post.norm)
                                                        + model._shift[enc.words]),
                        minlength=enc.n_rows)
    total = gamma.sum(axis=1)
    elog = digamma(gamma) - digamma(total)[:, None]
    return (words + ((alpha - gamma) * elog).sum(axis=1)
            + (gammaln(gamma) - gammaln(alpha)).sum(axis=1)
            + gammaln(alpha.sum()) - gammaln(total))


def _pieces(enc: BagOfWordsEncoded, n_topics: int) -> Iterator[tuple[int, int]]:
    """Document ranges whose nonzeros times topics stay under :data:`MAX_PIECE_CELLS`."""
    limit = max(1, MAX_PIECE_CELLS // n_topics)
    start = 0
    while start < enc.n_rows:
        stop = int(np.searchsorted(enc.offsets, enc.offsets[start] + limit, side="right")) - 1
        stop = min(max(stop, start + 1), enc.n_rows)
        yield start, stop
        start = stop


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
class LDADistribution(Distribution, ScoresRanges):
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
        # exp(E[log beta]) shifted per word by its largest topic, so no word's column underflows
        # (the shift cancels in every ratio; the bound adds it back)
        elog_beta = digamma(lam) - digamma(lam.sum(axis=1))[:, None]
        self._shift = elog_beta.max(axis=0)
        self._topics_bound = self._bound_of_topics(elog_beta)
        np.subtract(elog_beta, self._shift, out=elog_beta)
        self._table = np.exp(elog_beta, out=elog_beta)  # held with lambda: 2 x K x V floats
        self._per_word = self._topics_bound / max(float(lam.sum() - k * v * eta), 1.0)

    @property
    def n_topics(self) -> int:
        return self.topics.shape[0]

    @property
    def topic_word(self) -> np.ndarray:
        """The topics' mean word probabilities, array of shape (n_topics, n_words)."""
        return self.topics / self.topics.sum(axis=1, keepdims=True)

    def topics_bound(self) -> float:
        """The topics' ELBO term ``E[log p(beta | eta) - log q(beta | lambda)]``."""
        return self._topics_bound

    def _bound_of_topics(self, elog_beta: np.ndarray) -> float:
        lam, eta, v = self.topics, self.eta, self.topics.shape[1]
        return float(((eta - lam) * elog_beta).sum() + (gammaln(lam) - gammaln(eta)).sum()
                     + (gammaln(v * eta) - gammaln(lam.sum(axis=1))).sum())

    # --- scoring ---

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        return self.score_ranges(enc, precision, whole_range(self.n_topics))

    def score_ranges(self, enc: Encoded, precision: Precision, run: RunRanges) -> np.ndarray:
        """Each document's ELBO plus its words' share of the topics' term, shape (n_rows,)."""
        _native(precision)
        out = np.empty(enc.n_rows)
        for lo, hi in _pieces(enc, self.n_topics):
            piece = enc.rows(lo, hi)
            out[lo:hi] = _doc_bound(self, piece, _solve(self, piece, run)) \
                + piece.lengths() * self._per_word
        return out

    def _encode(self, rows: Any) -> BagOfWordsEncoded:
        return rows if isinstance(rows, BagOfWordsEncoded) else self._encoder.encode(rows)

    def elbo(self, rows: Any) -> float:
        """The evidence lower bound of the documents ``rows``: their own terms plus the topics'
        term once (scikit-learn's ``_approx_bound``)."""
        enc = self._encode(rows)
        run = whole_range(self.n_topics)
        return float(sum(_doc_bound(self, enc.rows(lo, hi), _solve(self, enc.rows(lo, hi), run))
                         .sum() for lo, hi in _pieces(enc, self.n_topics))) + self.topics_bound()

    def perplexity(self, rows: Any) -> float:
        """``exp(-elbo(rows) / words in rows)``, scikit-learn's perplexity."""
        enc = self._encode(rows)
        words = float(enc.counts.sum())
        if words <= 0:
            raise DataError("no words to compute a perplexity over")
        return float(np.exp(-self.elbo(enc) / words))

    def transform(self, rows: Any) -> np.ndarray:
        """Document-topic proportions (normalised gamma), array of shape (n_rows, n_topics)."""
        enc = self._encode(rows)
        out = np.empty((enc.n_rows, self.n_topics))
        run = whole_range(self.n_topics)
        for lo, hi in _pieces(enc, self.n_topics):
            g = _solve(self, enc.rows(lo, hi), run).gamma
            out[lo:hi] = g / g.sum(axis=1, keepdims=True)
        return out

    def top_words(self, n: int = 10) -> list[list[tuple[Any, float]]]:
        """For each topic, its ``n`` most probable words with their probabilities."""
        probs = self.topic_word
        order = np.argsort(-probs, axis=1, kind="stable")[:, :n]
        return [[(self.vocabulary[j], float(probs[t, j])) for j in row]
                for t, row in enumerate(order)]

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
        for lo, hi in _pieces(enc, model.n_topics):
            piece, w = enc.rows(lo, hi), weights[lo:hi]
            post = _solve(model, piece, run)
            lengths = piece.lengths()
            out[lo:hi] = _doc_bound(model, piece, post) + lengths * model._per_word
            self._add(model, piece, w, post, run)
            self.sums += (w.sum(), w @ lengths)
        return out

    def _add(self, model: LDADistribution, enc: BagOfWordsEncoded, w: np.ndarray,
             post: _Posterior, run: RunRanges) -> None:
        gamma = post.gamma
        self.log_theta += w @ (digamma(gamma) - digamma(gamma.sum(axis=1))[:, None])
        seen, column = np.unique(enc.words, return_inverse=True)
        ratio = csr_matrix((enc.counts / post.norm * w[post.doc], column.ravel(), enc.offsets),
                           shape=(enc.n_rows, seen.shape[0]))
        per_word = ratio.T.tocsr()

        def add(a: int, b: int) -> None:
            self.topic_words[a:b, seen] += model._table[a:b, seen] * \
                (per_word @ post.exp_theta[:, a:b]).T
        run(add)

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


# ---------------------------------------------------------------------------------------------
# The M-step


def _inverse_digamma(y: np.ndarray) -> np.ndarray:
    """x with digamma(x) = y (Minka's start, five Newton steps)."""
    x = np.where(y >= -2.22, np.exp(y) + 0.5, -1.0 / (y - digamma(1.0)))
    for _ in range(5):
        x = x - (digamma(x) - y) / polygamma(1, x)
    return x


def learn_alpha(n_docs: float, log_theta: np.ndarray, start: np.ndarray,
                iterations: int = 200, tol: float = 1e-10) -> np.ndarray:
    """The Dirichlet prior maximising ``n_docs * log B(alpha)^-1 + (alpha - 1) . log_theta``
    (Minka's fixed point ``psi(alpha_k) = psi(sum alpha) + log_theta_k / n_docs``)."""
    mean = log_theta / n_docs
    alpha = start.copy()
    for _ in range(iterations):
        new = np.maximum(_inverse_digamma(digamma(alpha.sum()) + mean), 1e-10)
        done = np.abs(new - alpha).max() <= tol * alpha.max()
        alpha = new
        if done:
            break
    return alpha


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
                    "eta": none_or(number(0, above=True)), "unknown": one_of(*_UNKNOWN),
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

    def _eta(self) -> float:
        return 1.0 / self.n_topics if self.eta is None else float(self.eta)

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
        return LDADistribution(topics, alpha, self._eta(), self._vocabulary(), mean_length,
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
        return self._model(self._eta() + topic_words, alpha, mean_length)

    def __repr__(self) -> str:
        return f"LDAEstimator({self.n_topics}, alpha={self.alpha!r}, eta={self.eta!r})"
