"""A Dirichlet's parameters from its observations' mean log-probabilities, by Minka's fixed
point: what LDA learns its document-topic prior ``alpha`` by (the M-step's ``alpha=None``).

>>> import numpy as np
>>> theta = np.random.default_rng(0).dirichlet([0.5, 1.0, 2.0], size=20_000)
>>> learn_alpha(20_000.0, np.log(theta).sum(0), np.full(3, 1 / 3)).round(1).tolist()
[0.5, 1.0, 2.0]
"""

from __future__ import annotations

import numpy as np

from mixfold.families._scipy import digamma, polygamma

__all__ = ["learn_alpha"]


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
