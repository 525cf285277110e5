"""k-means on an initialisation sample: where a mixture of point families (Gaussians, Gamma on
log x) seeds its components, as scikit-learn's Gaussian mixtures do.

Each run is a greedy weighted k-means++ seeding refined by Lloyd's iterations to convergence;
the run of lowest weighted inertia is kept. The points are centred at their weighted mean first,
so the expanded distances ``|x|^2 - 2 x.c + |c|^2`` cancel nothing far from the origin.

>>> rng = np.random.default_rng(0)
>>> points = np.concatenate([rng.normal(-5, 1, (50, 2)), rng.normal(5, 1, (50, 2))])
>>> labels = kmeans_labels(points, np.ones(100), 2, np.random.default_rng(1), 100, runs=3)
>>> len(set(labels[:50])), len(set(labels[50:])), bool(labels[0] != labels[50])
(1, 1, True)
"""

from __future__ import annotations

import numpy as np

from mixfold.compute.centre import weighted_centre

__all__ = ["kmeans_labels", "greedy_seeds", "lloyd"]


def kmeans_labels(points: np.ndarray, weights: np.ndarray, k: int, gen: np.random.Generator,
                  iterations: int, runs: int = 1) -> np.ndarray:
    """Cluster labels (int64, (n,)) of ``points`` (n, D) with row ``weights`` (n,): the
    lowest-inertia of ``runs`` k-means runs, each :func:`greedy_seeds` then :func:`lloyd`'s
    iterations (at most ``iterations``), on the points centred first."""
    points = points - weighted_centre(points, weights)
    sq = np.einsum("ij,ij->i", points, points)
    best, best_inertia = None, np.inf
    for _ in range(runs):
        labels, inertia = lloyd(points, sq, weights, greedy_seeds(points, sq, weights, k, gen),
                                iterations)
        if best is None or inertia < best_inertia:
            best, best_inertia = labels, inertia
    return best


def greedy_seeds(points: np.ndarray, sq: np.ndarray, weights: np.ndarray, k: int,
                 gen: np.random.Generator) -> np.ndarray:
    """``k`` centres (k, D) by greedy weighted k-means++ (scikit-learn's): each new centre is
    the best (lowest potential) of ``2 + log(k)`` candidates drawn in proportion to the
    weighted squared distance to the centres so far. ``sq`` holds the points' squared norms."""
    n = points.shape[0]
    trials = 2 + int(np.log(k))
    p = weights / weights.sum()
    first = points[gen.choice(n, p=p)]
    centers = [first]
    d2 = np.maximum(sq - 2 * points @ first + first @ first, 0.0)
    for _ in range(1, k):
        score = d2 * weights
        if not 0 < score.sum() < np.inf:  # all points on the centres, or distances overflowed
            candidates = gen.choice(n, size=trials, p=p)
        else:
            candidates = gen.choice(n, size=trials, p=score / score.sum())
        c = points[candidates]
        to_each = np.maximum(sq[:, None] - 2 * points @ c.T + np.einsum("ij,ij->i", c, c), 0.0)
        closer = np.minimum(d2[:, None], to_each)
        pick = int(np.argmin(weights @ closer))
        centers.append(c[pick])
        d2 = closer[:, pick]
    return np.array(centers)


def lloyd(points: np.ndarray, sq: np.ndarray, weights: np.ndarray, c: np.ndarray,
          iterations: int) -> tuple[np.ndarray, float]:
    """Lloyd's iterations from the centres ``c`` (k, D; moved in place) until no label changes
    (or ``iterations``): the labels (n,) and their weighted inertia. A centre that loses all
    its points stays where it is."""
    k = c.shape[0]
    labels = np.full(points.shape[0], -1, dtype=np.int64)
    dist = np.zeros((points.shape[0], k))
    for _ in range(iterations):
        dist = sq[:, None] - 2 * points @ c.T + np.einsum("ij,ij->i", c, c)[None, :]
        new = dist.argmin(axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
        mass = np.bincount(labels, weights=weights, minlength=k)
        sums = np.zeros_like(c)
        np.add.at(sums, labels, points * weights[:, None])
        filled = mass > 0
        c[filled] = sums[filled] / mass[filled, None]
    inertia = float(weights @ np.maximum(dist[np.arange(len(labels)), labels], 0.0))
    return labels, inertia
