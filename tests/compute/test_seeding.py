"""The seeded start of a mixture's components: k-means for point families, seeded rows and a
few EM iterations otherwise, checked on data whose clusters are known."""

import numpy as np

import mixfold
from mixfold import (CategoricalEstimator, GaussianDistribution, GaussianEstimator,
                     MixtureEstimator, PoissonEstimator)
from mixfold.compute import seeding
from mixfold.compute.seeding import indistinct_units, seed_points, seed_rows, seeded_start


def bound(est, rows):
    encoder = est.encoder().fit(rows)
    return est.bind(encoder), encoder.encode(rows)


def test_seed_rows_gives_each_unit_its_rows_once():
    seeds = seed_rows(10, 3, 2, np.random.default_rng(0))
    assert seeds.sum(axis=0).tolist() == [2.0, 2.0, 2.0]
    assert set(seeds.sum(axis=1).tolist()) == {0.0, 1.0}
    assert seed_rows(2, 3, 5, np.random.default_rng(0)).sum() == 2  # fewer rows than units


def test_points_only_for_point_families_on_one_encoding():
    x = np.array([0.0, 1.0, 2.0])
    est, enc = bound(MixtureEstimator([GaussianEstimator()] * 2), x)
    np.testing.assert_array_equal(seed_points(est, enc), x[:, None])
    est, enc = bound(MixtureEstimator([PoissonEstimator()] * 2), [0, 1, 2])
    assert seed_points(est, enc) is None
    est, enc = bound(MixtureEstimator([GaussianEstimator()] * 4), x)
    assert seed_points(est, enc) is None  # fewer rows than components


def test_kmeans_start_finds_separated_clusters():
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.normal(-10, 1, 200), rng.normal(10, 1, 100)])
    est, enc = bound(MixtureEstimator([GaussianEstimator()] * 2), x)
    guess = seeded_start(est, enc, np.ones(x.size), mixfold.InitRandom(0))
    order = np.argsort([c.mu for c in guess.components])
    labels = np.argsort(order)[guess.predict(enc)]  # 0: the lower component
    assert labels.tolist() == [0] * 200 + [1] * 100
    np.testing.assert_allclose(guess.weights[order], [2 / 3, 1 / 3], atol=0.02)


def test_seeded_rows_and_em_separate_categorical_clusters(monkeypatch):
    rows = ["a"] * 150 + ["b"] * 50
    est, enc = bound(MixtureEstimator([CategoricalEstimator()] * 2), rows)
    guess = seeded_start(est, enc, np.ones(len(rows)), mixfold.InitRandom(1))
    best = 150 * np.log(0.75) + 50 * np.log(0.25)  # the maximum likelihood of the rows
    assert guess.seq_log_density(enc).sum() >= best * 1.01
    # the EM iterations only ever raise the sample's log-likelihood
    monkeypatch.setattr(seeding, "EM_ITERATIONS", 0)
    unrefined = seeded_start(est, enc, np.ones(len(rows)), mixfold.InitRandom(1))
    assert guess.seq_log_density(enc).sum() >= unrefined.seq_log_density(enc).sum() - 1e-9


def test_indistinct_units():
    same = [GaussianDistribution(0, 1), GaussianDistribution(0, 1)]
    enc = same[0].encoder().encode([0.0, 1.0])
    assert indistinct_units(same, enc)
    assert not indistinct_units([same[0], GaussianDistribution(1, 1)], enc)
