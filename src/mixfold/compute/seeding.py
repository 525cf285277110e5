"""The seeded start of a node whose K units compete for each row (a mixture's components): its
first posteriors from the initialisation sample, from which the node guesses its units.

Units of a family whose rows are points (:class:`~mixfold.capabilities.SeedsFromPoints`:
Gaussian families, Gamma on log x) start from the best of :data:`KMEANS_RUNS` k-means runs
(:func:`~mixfold.compute.kmeans.kmeans_labels`), as scikit-learn's Gaussian mixtures do. Others
start from :data:`SEED_ROWS` random rows each, refined by :data:`EM_ITERATIONS` iterations of the
node's own fold on the sample (:func:`~mixfold.compute.fold.fold_rows`), which separate them.
The node is driven through a small interface (:class:`SeededNode`): its estimators, which
encoding each reads, and how it guesses its units from posteriors.

>>> seed_rows(6, 2, 2, np.random.default_rng(0)).sum(axis=0).tolist()
[2.0, 2.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from mixfold.capabilities import SeedsFromPoints
from mixfold.compute.fold import DEFAULT_CHUNK_ROWS, fold_rows
from mixfold.compute.kmeans import kmeans_labels
from mixfold.compute.labelled import Labelled
from mixfold.errors import NumericalError, ParameterError
from mixfold.precision.bands import FLOAT64

__all__ = ["SeededNode", "seeded_start", "seed_points", "seed_rows", "refine",
           "indistinct_units", "LLOYD_ITERATIONS", "KMEANS_RUNS", "SEED_ROWS", "EM_ITERATIONS"]

#: Lloyd's iterations of each k-means run (to convergence, as scikit-learn's KMeans, unless
#: this many come first).
LLOYD_ITERATIONS = 100
#: k-means runs from independent greedy k-means++ seedings; the lowest inertia is kept: one run
#: can merge two clusters and split another, the best of a few rarely does.
KMEANS_RUNS = 3
#: Without points to cluster: seed rows per unit, then EM iterations on the sample.
SEED_ROWS = 5
EM_ITERATIONS = 10


class SeededNode(Protocol):
    """What the seeded start asks of a node's estimator: its unit estimators (``parts``), which
    part of a shared encoding each unit reads (``slots``, ``None``: one encoding), the node
    its units guess from posteriors (``guess_from``), and its fold (``accumulator_factory``,
    ``estimate``)."""

    slots: tuple[int, ...] | None

    def parts(self) -> Sequence[Any]: ...

    def guess_from(self, sample: Any, weights: np.ndarray, resp: np.ndarray, rng: Any) -> Any: ...

    def accumulator_factory(self) -> Any: ...

    def estimate(self, nobs: float, stats: Any) -> Any: ...


def seeded_start(node: SeededNode, sample: Any, weights: np.ndarray, rng: Any) -> Any:
    """The node's start from the initialisation ``sample`` (rows, with ``weights``): its units
    guessed from k-means clusters of the rows' points, or from seeded rows refined by a few
    EM iterations; with labels riding along, the unlabelled start's posteriors times them."""
    if isinstance(sample, Labelled):
        guess = seeded_start(node, sample.inner, weights, rng)
        return node.guess_from(sample.inner, weights, guess.seq_posterior(sample), rng)
    k, gen = len(node.parts()), rng.generator()
    points = seed_points(node, sample)
    if points is not None:
        labels = kmeans_labels(points, weights, k, gen, LLOYD_ITERATIONS, KMEANS_RUNS)
        return node.guess_from(sample, weights, np.eye(k)[labels], rng)
    seeds = seed_rows(sample.n_rows, k, SEED_ROWS, gen)
    guess = refine(node, sample, weights, node.guess_from(sample, weights, seeds, rng))
    return node.guess_from(sample, weights, guess.seq_posterior(sample), rng)


def seed_points(node: SeededNode, sample: Any) -> np.ndarray | None:
    """The sample's rows as points (n_rows, dim) when every unit is of one family that seeds
    from points and reads the one encoding, and there are at least as many rows as units;
    ``None`` otherwise."""
    classes = {type(e) for e in node.parts()}
    family = classes.pop().distribution_class if len(classes) == 1 else None
    if not (isinstance(family, type) and issubclass(family, SeedsFromPoints)) \
            or node.slots is not None or sample.n_rows < len(node.parts()):
        return None
    return family.stack_points(sample)


def seed_rows(n: int, k: int, per_unit: int, gen: np.random.Generator) -> np.ndarray:
    """One-hot posteriors (n, k) of ``per_unit`` random rows for each of ``k`` units (fewer
    where the rows run short; every other row all zero)."""
    seeds = np.zeros((n, k))
    per_unit = max(1, min(per_unit, n // k))
    order = gen.permutation(n)[:per_unit * k]
    seeds[order, np.arange(order.size) % k] = 1.0
    return seeds


def refine(node: SeededNode, sample: Any, weights: np.ndarray, guess: Any) -> Any:
    """``guess`` after :data:`EM_ITERATIONS` iterations of the node's fold on the sample in
    float64 (fewer where an M-step fails: the last guess that stood)."""
    total_weight = float(weights.sum())
    for _ in range(EM_ITERATIONS):
        acc = node.accumulator_factory().make()
        try:
            fold_rows(acc, sample, weights, guess, FLOAT64, DEFAULT_CHUNK_ROWS)
            acc.tie_keys()
            guess = node.estimate(total_weight, acc.value())
        except (NumericalError, ParameterError):
            break
    return guess


def indistinct_units(units: Sequence[Any], rows: Any) -> bool:
    """Whether two of the ``units`` (distributions) score every one of ``rows`` alike (a chain
    could not tell them apart)."""
    scores = np.array([u.seq_log_density(rows) for u in units])
    return any(np.allclose(scores[i], scores[j], rtol=0, atol=1e-9)
               for i in range(len(scores)) for j in range(i + 1, len(scores)))
