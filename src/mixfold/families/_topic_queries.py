"""What a fitted topic model answers besides its log-density: the topics' word probabilities
and most probable words, each document's topic proportions, the evidence lower bound and
scikit-learn's perplexity. :class:`~mixfold.LDADistribution` inherits them; the documents may
come encoded or raw (encoded by the model's encoder).

>>> from mixfold import LDADistribution
>>> d = LDADistribution([[5.0, 1.0], [1.0, 5.0]], 0.5, vocabulary=["a", "b"])
>>> d.top_words(1)
[[('a', 0.8333333333333334)], [('b', 0.8333333333333334)]]
>>> d.transform([["a", "a", "a"]]).argmax(axis=1).tolist()
[0]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from mixfold.errors import DataError
from mixfold.families._hooks import whole_range
from mixfold.families._lda_fixed_point import doc_bound
from mixfold.families._protocol import _taking_raw_rows

__all__ = ["TopicQueries"]


class TopicQueries:
    """The queries of a topic model with topics ``topics`` (K, V) (the Dirichlet parameters
    lambda) over ``vocabulary`` and document-topic prior ``alpha_vector`` (K,), whose
    documents its ``_solved`` solves piece by piece (``_shift``, the fixed point's table's
    shift per word, and ``_topics_bound``, the topics' term, held beside them)."""

    topics: np.ndarray
    vocabulary: tuple
    alpha_vector: np.ndarray
    n_topics: int
    _shift: np.ndarray
    _topics_bound: float
    _solved: Callable[..., Iterator[tuple[int, int, Any, Any]]]

    @property
    def topic_word(self) -> np.ndarray:
        """The topics' mean word probabilities, array of shape (n_topics, n_words)."""
        return self.topics / self.topics.sum(axis=1, keepdims=True)

    def topics_bound(self) -> float:
        """The topics' ELBO term ``E[log p(beta | eta) - log q(beta | lambda)]``."""
        return self._topics_bound

    @_taking_raw_rows
    def elbo(self, rows: Any) -> float:
        """The evidence lower bound of the documents (encoded or raw rows): their own terms plus
        the topics' term once (scikit-learn's ``_approx_bound``)."""
        return float(sum(doc_bound(piece, post, self.alpha_vector, self._shift).sum()
                         for _, _, piece, post in self._solved(rows, whole_range(self.n_topics)))) \
            + self.topics_bound()

    @_taking_raw_rows
    def perplexity(self, rows: Any) -> float:
        """``exp(-elbo(rows) / words in rows)``, scikit-learn's perplexity."""
        words = float(rows.counts.sum())
        if words <= 0:
            raise DataError("no words to compute a perplexity over")
        return float(np.exp(-self.elbo(rows) / words))

    @_taking_raw_rows
    def transform(self, rows: Any) -> np.ndarray:
        """Document-topic proportions (normalised gamma) of the documents (encoded or raw rows),
        array of shape (n_rows, n_topics)."""
        out = np.empty((rows.n_rows, self.n_topics))
        for lo, hi, _, post in self._solved(rows, whole_range(self.n_topics)):
            out[lo:hi] = post.gamma / post.gamma.sum(axis=1, keepdims=True)
        return out

    def top_words(self, n: int = 10) -> list[list[tuple[Any, float]]]:
        """For each topic, its ``n`` most probable words with their probabilities."""
        probs = self.topic_word
        order = np.argsort(-probs, axis=1, kind="stable")[:, :n]
        return [[(self.vocabulary[j], float(probs[t, j])) for j in row]
                for t, row in enumerate(order)]
