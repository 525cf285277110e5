"""compute/kmeans.py against scikit-learn's KMeans (the same optimum on separated clusters) and a
brute-force Lloyd's step written here (the labels it returns are a fixed point: each row's
nearest weighted centre of its cluster)."""

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score

from mixfold.compute.kmeans import greedy_seeds, kmeans_labels, lloyd


def blobs(rng, k=4, d=3, per=150, spread=0.6, offset=0.0):
    centres = rng.normal(0.0, 8.0, (k, d))
    x = np.concatenate([c + rng.normal(0.0, spread, (per, d)) for c in centres])
    return x + offset, np.repeat(np.arange(k), per)


def brute_force_inertia_and_fixed_point(x, w, labels, k):
    """(weighted inertia, whether ``labels`` is a fixed point of Lloyd's step), by direct
    differences rather than expanded distances."""
    centres = np.array([np.average(x[labels == j], axis=0, weights=w[labels == j])
                        for j in range(k)])
    d2 = ((x[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
    inertia = float(w @ d2[np.arange(len(x)), labels])
    return inertia, bool(np.array_equal(d2.argmin(axis=1), labels))


@pytest.mark.parametrize("offset", [0.0, 1e9])  # far from the origin: centred first
def test_kmeans_finds_scikit_learns_optimum_on_separated_clusters(offset):
    rng = np.random.default_rng(3)
    x, truth = blobs(rng, offset=offset)
    w = np.ones(len(x))
    labels = kmeans_labels(x, w, 4, np.random.default_rng(0), 100, runs=3)
    theirs = KMeans(4, n_init=3, random_state=0).fit(x - offset)
    assert adjusted_rand_score(labels, truth) == 1.0
    assert adjusted_rand_score(labels, theirs.labels_) == 1.0
    inertia, fixed = brute_force_inertia_and_fixed_point(x - offset, w, labels, 4)
    assert fixed
    assert inertia == pytest.approx(theirs.inertia_, rel=1e-9)


def test_weighted_rows_count_as_repeated_rows():
    rng = np.random.default_rng(5)
    x, _ = blobs(rng, k=3, d=2, per=40, spread=2.5)
    w = rng.integers(1, 4, len(x)).astype(float)
    labels = kmeans_labels(x, w, 3, np.random.default_rng(1), 100, runs=4)
    inertia, fixed = brute_force_inertia_and_fixed_point(x, w, labels, 3)
    assert fixed
    repeated = np.repeat(x, w.astype(int), axis=0)
    theirs = KMeans(3, n_init=10, random_state=0).fit(repeated)
    assert inertia <= theirs.inertia_ * (1 + 1e-9)


def test_greedy_seeds_take_one_centre_in_each_tight_cluster_and_respect_the_weights():
    rng = np.random.default_rng(7)
    x, truth = blobs(rng, k=5, d=2, per=30, spread=0.01)
    sq = np.einsum("ij,ij->i", x, x)
    seeds = greedy_seeds(x, sq, np.ones(len(x)), 5, np.random.default_rng(2))
    nearest = ((x[:, None, :] - seeds[None]) ** 2).sum(axis=2).argmin(axis=0)
    assert sorted(truth[nearest].tolist()) == [0, 1, 2, 3, 4]
    only = np.zeros(len(x))
    only[17] = 1.0  # all the weight on one row: it is the first centre
    first = greedy_seeds(x, sq, only, 1, np.random.default_rng(2))
    assert np.array_equal(first, x[17:18])


def test_lloyd_leaves_a_centre_without_points_where_it_was():
    x = np.array([[0.0], [0.2], [10.0], [10.4]])
    sq = (x ** 2).ravel()
    centres = np.array([[0.0], [10.0], [1e6]])
    labels, inertia = lloyd(x, sq, np.ones(4), centres, 100)
    assert labels.tolist() == [0, 0, 1, 1]
    assert centres.ravel().tolist() == [0.1, 10.2, 1e6]
    assert inertia == pytest.approx(0.01 + 0.01 + 0.04 + 0.04)


def test_the_same_generator_gives_the_same_labels():
    x, _ = blobs(np.random.default_rng(9), k=6, spread=3.0)
    a = kmeans_labels(x, np.ones(len(x)), 6, np.random.default_rng(4), 100, runs=3)
    b = kmeans_labels(x, np.ones(len(x)), 6, np.random.default_rng(4), 100, runs=3)
    assert np.array_equal(a, b)
