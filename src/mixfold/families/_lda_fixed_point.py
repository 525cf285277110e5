"""LDA's variational E-step for one document at a time, vectorised over the documents of a
piece: each document's posterior gamma by Blei, Ng & Jordan's fixed point (compiled steps in
:mod:`mixfold.compute.numba_lda`, through :mod:`mixfold.compute.kernels`, with the NumPy steps
beside them), what the solved posteriors give (each document's ELBO terms, the expected
topic-word counts), the topics' table the fixed point reads, and the pieces a chunk is cut into.
The work over topics runs by ranges of topics through a :data:`~mixfold.families._hooks.RunRanges`
(all of them at once, or each worker's range under model parallelism); over every topic at once
(:class:`~mixfold.families._hooks.WholeRange`, the serial run) the compiled kernels solve each
document to convergence in one call instead (:func:`mixfold.compute.kernels.lda_documents`: the
same steps and convergence test).

>>> import numpy as np
>>> from mixfold.families._hooks import whole_range
>>> from mixfold.families._bag_of_words import BagOfWordsEncoder
>>> table, shift, _ = topic_table(np.array([[5.0, 1.0], [1.0, 5.0]]), 0.5)
>>> enc = BagOfWordsEncoder(["a", "b"]).encode([["a", "a"], ["b"]])
>>> post = solve(enc, np.full(2, 0.5), table, whole_range(2), 100, 1e-8)
>>> (post.gamma / post.gamma.sum(axis=1, keepdims=True)).argmax(axis=1).tolist()
[0, 1]
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from mixfold.compute.kernels import (kernels_available, lda_documents, lda_norm, lda_step,
                                     lda_update, lda_word_sums)
from mixfold.families._bag_of_words import BagOfWordsEncoded
from mixfold.families._hooks import RunRanges, WholeRange
from mixfold.families._scipy import csr_matrix, digamma, gammaln

__all__ = ["Posterior", "FixedPoint", "solve", "doc_bound", "pieces", "topic_table",
           "add_expected_counts", "MAX_PIECE_CELLS", "COMPACT_BELOW"]

#: Nonzeros x topics per piece of a chunk: bounds the gathered topic columns (32 MiB each).
MAX_PIECE_CELLS = 1 << 22
#: Re-gather the iterating documents' nonzeros once they are under this share of those held.
COMPACT_BELOW = 0.75


def _compiled(run: RunRanges) -> bool:
    return isinstance(run, WholeRange) and kernels_available()


def topic_table(lam: np.ndarray, eta: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(table, shift, the topics' ELBO term) of topics ``lam`` (K, V) under the prior ``eta``:
    ``table`` is exp(E[log beta]) shifted per word by its largest topic, so no word's column
    underflows (the ``shift`` (V,) cancels in every ratio; :func:`doc_bound` adds it back); the
    term is ``E[log p(beta | eta) - log q(beta | lambda)]``."""
    v = lam.shape[1]
    elog_beta = digamma(lam) - digamma(lam.sum(axis=1))[:, None]
    shift = elog_beta.max(axis=0)
    bound = float(((eta - lam) * elog_beta).sum() + (gammaln(lam) - gammaln(eta)).sum()
                  + (gammaln(v * eta) - gammaln(lam.sum(axis=1))).sum())
    np.subtract(elog_beta, shift, out=elog_beta)
    return np.exp(elog_beta, out=elog_beta), shift, bound


def _exp_dirichlet(gamma: np.ndarray) -> np.ndarray:
    """exp(E[log theta]) of Dirichlet rows ``gamma`` (n, K)."""
    return np.exp(digamma(gamma) - digamma(gamma.sum(axis=1))[:, None])


def _summed(parts: list[np.ndarray]) -> np.ndarray:
    """The ranges' partial sums added in range order (one range: itself, bit for bit)."""
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


class Posterior:
    """A piece's solved variational parameters: ``gamma`` (n, K), ``exp_theta`` (n, K) and the
    normaliser of every nonzero over the topics (shifted per word, see :func:`topic_table`)."""

    __slots__ = ("gamma", "exp_theta", "norm", "doc")

    def __init__(self, gamma: np.ndarray, exp_theta: np.ndarray, norm: np.ndarray,
                 doc: np.ndarray):
        self.gamma, self.exp_theta, self.norm, self.doc = gamma, exp_theta, norm, doc


class FixedPoint:
    """One piece's documents iterating gamma = alpha + exp_theta * (ratio @ beta); each step
    over topics is a method of a unit range ``(a, b)``, run by a :data:`RunRanges`."""

    def __init__(self, alpha: np.ndarray, table: np.ndarray, enc: BagOfWordsEncoded):
        n, k = enc.n_rows, table.shape[0]
        self.alpha, self.counts = alpha, enc.counts
        self.doc = enc.doc_of_nonzero()
        sizes = self.sizes = np.diff(enc.offsets)
        self.gamma = np.ones((n, k))
        self.gamma[sizes == 0] = self.alpha  # an empty document's posterior is its prior
        self.exp_theta = _exp_dirichlet(self.gamma)
        self.words, self.table = enc.words, table
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


def solve(enc: BagOfWordsEncoded, alpha: np.ndarray, table: np.ndarray, run: RunRanges,
          iterations: int, tol: float) -> Posterior:
    """Each document's gamma by Blei et al.'s fixed point (prior ``alpha`` (K,), the topics'
    ``table`` (K, V)), stopped document by document when its mean change falls under ``tol``
    (as scikit-learn's E-step) or after ``iterations``; the work over topics runs by ranges
    through ``run``, everything over all topics centrally (the serial
    :class:`~mixfold.families._hooks.WholeRange`: each document at once, compiled)."""
    if _compiled(run):
        gamma, exp_theta, norm, _ = lda_documents(table.T, enc.words, enc.counts, enc.offsets,
                                                  alpha, iterations, tol)
        return Posterior(gamma, exp_theta, norm, enc.doc_of_nonzero())
    fp = FixedPoint(alpha, table, enc)
    run(fp.gather)
    for _ in range(iterations if fp.docs.size else 0):
        if not fp.step(run, tol):
            break
    return Posterior(fp.gamma, fp.exp_theta, _summed(run(fp.final_norm)), fp.doc)


def doc_bound(enc: BagOfWordsEncoded, post: Posterior, alpha: np.ndarray,
              shift: np.ndarray) -> np.ndarray:
    """Each document's own ELBO terms (scikit-learn's ``_approx_bound`` per document), with the
    table's ``shift`` per word added back."""
    gamma = post.gamma
    words = np.bincount(post.doc, weights=enc.counts * (np.log(post.norm)
                                                        + shift[enc.words]),
                        minlength=enc.n_rows)
    total = gamma.sum(axis=1)
    elog = digamma(gamma) - digamma(total)[:, None]
    return (words + ((alpha - gamma) * elog).sum(axis=1)
            + (gammaln(gamma) - gammaln(alpha)).sum(axis=1)
            + gammaln(alpha.sum()) - gammaln(total))


def pieces(enc: BagOfWordsEncoded, n_topics: int) -> Iterator[tuple[int, int]]:
    """Document ranges whose nonzeros times topics stay under :data:`MAX_PIECE_CELLS`."""
    limit = max(1, MAX_PIECE_CELLS // n_topics)
    start = 0
    while start < enc.n_rows:
        stop = int(np.searchsorted(enc.offsets, enc.offsets[start] + limit, side="right")) - 1
        stop = min(max(stop, start + 1), enc.n_rows)
        yield start, stop
        start = stop


def add_expected_counts(topic_words: np.ndarray, table: np.ndarray, enc: BagOfWordsEncoded,
                        w: np.ndarray, post: Posterior, run: RunRanges) -> None:
    """Add the documents' expected topic-word counts, weighted by ``w`` (n_rows,), to
    ``topic_words`` (K, V): each range of topics adds its own rows (the serial
    :class:`~mixfold.families._hooks.WholeRange`: all at once, compiled, the same sums in the
    same order; a word no document holds adds zero)."""
    if _compiled(run):
        topic_words += table * lda_word_sums(post.exp_theta, enc.words, enc.counts, enc.offsets,
                                             post.norm, w, table.shape[1]).T
        return
    seen, column = np.unique(enc.words, return_inverse=True)
    ratio = csr_matrix((enc.counts / post.norm * w[post.doc], column.ravel(), enc.offsets),
                       shape=(enc.n_rows, seen.shape[0]))
    per_word = ratio.T.tocsr()

    def add(a: int, b: int) -> None:
        topic_words[a:b, seen] += table[a:b, seen] * (per_word @ post.exp_theta[:, a:b]).T
    run(add)
