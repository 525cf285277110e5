"""Documents as bags of words: token lists, strings (split into lower-case word tokens),
``{word: count}`` mappings, a ``scipy.sparse`` document-term matrix or Spark ML count vectors,
read over a fixed vocabulary into CSR rows of word counts (:class:`BagOfWordsEncoded`), never
densified. LDA's rows, and the Multinomial's when they come as bags.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from mixfold.errors import DataError, DataTypeError
from mixfold.families._protocol import Encoded, Encoder
from mixfold.families._sparse import (is_count_matrix, sparse_counts, spark_rows_as_mappings,
                                      spark_vector_width)
from mixfold.families._levels import ordered_levels

__all__ = ["BagOfWordsEncoded", "BagOfWordsEncoder", "UNKNOWN", "counts_as_bags"]

#: where these classes are public (and were defined before this module): pickles, reprs and a
#: checkpoint's fingerprint name them there
PUBLIC_HOME = "mixfold.families.lda"
#: what a word outside the vocabulary does at encode time
UNKNOWN = ("error", "ignore")
_TOKEN = re.compile(r"\w+")


class BagOfWordsEncoded(Encoded):
    """Documents as CSR rows: document ``i`` holds ``words[offsets[i]:offsets[i + 1]]`` (distinct
    word ids, increasing) with ``counts`` (float64) at the same places.

    ``offsets`` has shape (n_rows + 1,), int64, ``offsets[0] == 0``.
    """

    __module__ = PUBLIC_HOME
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


def counts_as_bags(values: Any, width: int, integral: bool, what: str) -> BagOfWordsEncoded:
    """A matrix of counts (dense or sparse, ``width`` columns) read as CSR rows, never
    densified; ``what`` names a column in the error a bad count raises."""
    csr = sparse_counts(values, width, integral, what)
    return BagOfWordsEncoded(csr.offsets, csr.columns, csr.counts)


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

    __module__ = PUBLIC_HOME

    def __init__(self, vocabulary: Sequence[Any] | None = None, unknown: str = "error"):
        if unknown not in UNKNOWN:
            raise ValueError(f"unknown must be one of {UNKNOWN}, got {unknown!r}")
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
        return BagOfWordsEncoder(ordered_levels(list(found)), self.unknown)

    def merge(self, other: Encoder) -> BagOfWordsEncoder:
        if not isinstance(other, BagOfWordsEncoder) or other.unknown != self.unknown:
            raise ValueError(f"cannot merge encoders {self!r} and {other!r}")
        if self.vocabulary is None or other.vocabulary is None:
            return self if other.vocabulary is None else other
        if self.vocabulary == other.vocabulary:
            return self
        return BagOfWordsEncoder(
            ordered_levels(list(dict.fromkeys(self.vocabulary + other.vocabulary))),
            self.unknown)

    def encode(self, values: Any) -> BagOfWordsEncoded:
        if self.vocabulary is None:
            raise DataError("no words to learn the vocabulary from: give vocabulary= or "
                            "documents with words")
        if is_count_matrix(values):
            return counts_as_bags(values, len(self.vocabulary), False, "word of the vocabulary")
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
