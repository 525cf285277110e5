"""Rows of counts over V levels, dense (n_rows, V) or sparse (bag-of-words): the log of each
row's multinomial coefficient ``log(n! / prod x_j!)``, and sparse rows as a scipy CSR matrix."""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.families._bag_of_words import BagOfWordsEncoded
from mixfold.families._scipy import csr_matrix
from mixfold.families.poisson import log_factorial

__all__ = ["as_csr", "log_coefficients", "sparse_log_coefficients"]


def as_csr(enc: BagOfWordsEncoded, n_levels: int) -> Any:
    """The rows as a scipy CSR matrix over the same arrays (nothing copied)."""
    return csr_matrix((enc.counts, enc.words, enc.offsets), shape=(enc.n_rows, n_levels))


def sparse_log_coefficients(enc: BagOfWordsEncoded) -> np.ndarray:
    """``log(n! / prod x_j!)`` of each sparse row."""
    per_count = np.bincount(enc.doc_of_nonzero(), weights=log_factorial(enc.counts),
                            minlength=enc.n_rows)
    return log_factorial(enc.lengths()) - per_count


def log_coefficients(x: np.ndarray) -> np.ndarray:
    """``log(n! / prod x_j!)`` of each row of counts (n_rows, V)."""
    return log_factorial(x.sum(axis=1)) - log_factorial(x.ravel()).reshape(x.shape).sum(axis=1)
