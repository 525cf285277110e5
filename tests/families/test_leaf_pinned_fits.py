"""The leaves moved to the short form (Categorical, NegativeBinomial, VonMises, Dirichlet,
Multinomial) fit and score bit for bit as before: every fitted parameter (as ``float.hex``) and
every score array of hard data, hashed, against digests pinned with main at 1a190e4 (the tree
before the move; ``python tests/families/test_leaf_pinned_fits.py`` prints them)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import scipy.sparse

import mixfold
from mixfold import (CategoricalDistribution, CategoricalEstimator, DirichletDistribution,
                     DirichletEstimator, GaussianEstimator, MixtureEstimator,
                     MultinomialDistribution, MultinomialEstimator, NegativeBinomialDistribution,
                     NegativeBinomialEstimator, RecordEstimator, VonMisesDistribution,
                     VonMisesEstimator)
from tests.families.pinned import all_digests, digest_model, digest_scores


PINNED = {  # computed with main at 1a190e4
    "categorical: mixture": "adef2de97679840a",
    "categorical: float32": "540d587e9f74258b",
    "categorical: int levels, prior": "1b1067df21ab9747",
    "categorical: record": "8b33bd4995be7ea3",
    "negative_binomial: mixture": "5e76a2942bae9e39",
    "negative_binomial: single": "3511271f1a1587a3",
    "von_mises: mixture": "25346a2dc54a0a6d",
    "von_mises: single": "2897d1c5de946e6f",
    "dirichlet: mixture": "1c14e73bc45785db",
    "dirichlet: single": "6930af0eae285346",
    "multinomial: bags": "6f902577972a1d30",
    "multinomial: sparse": "e5504f54fb356d9f",
    "multinomial: dense": "0d69472bc0d6f148",
    "categorical scores: float64 one": "52e65f7cdf38a6fc",
    "categorical scores: float64 stacked": "0a2dccde1d904af3",
    "categorical scores: float32 one": "52e65f7cdf38a6fc",
    "categorical scores: float32 stacked": "0a2dccde1d904af3",
    "von_mises scores: float64 one": "9eebd65594fcff1a",
    "von_mises scores: float64 stacked": "97f936c3db971346",
    "von_mises scores: float32 one": "6e525a2166f23fd8",
    "von_mises scores: float32 stacked": "b965903b60f25efd",
    "negative_binomial scores: float64 one": "10d21a8c27b36f5d",
    "negative_binomial scores: float32 one": "10d21a8c27b36f5d",
    "dirichlet scores: float64 one": "d8fd4d7707b3e105",
    "dirichlet scores: float64 stacked": "004c788b68bdccfb",
    "dirichlet scores: float32 one": "d8fd4d7707b3e105",
    "dirichlet scores: float32 stacked": "004c788b68bdccfb",
    "multinomial scores: float64 one": "2b40a8498f173866",
    "multinomial scores: float64 stacked": "7a0147df66a92e8e",
    "multinomial scores: float32 one": "2b40a8498f173866",
    "multinomial scores: float32 stacked": "7a0147df66a92e8e",
    "multinomial sparse scores: float64 one": "2b40a8498f173866",
    "multinomial sparse scores: float64 stacked": "7a0147df66a92e8e",
    "multinomial sparse scores: float32 one": "2b40a8498f173866",
    "multinomial sparse scores: float32 stacked": "7a0147df66a92e8e",
}


def _fit(x, est, max_iter=30, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (caps reached on purpose: the concentrated laws)
        return mixfold.optimize(x, est, progress=False, max_iter=max_iter, seed=3, **kw)


def _data():
    rng = np.random.default_rng(7)
    levels = [f"w{i:02d}" for i in range(40)]
    words = np.concatenate([
        CategoricalDistribution(rng.dirichlet(np.full(40, a)), levels=levels).sampler(i)
        .sample(3000) for i, a in enumerate([0.1, 0.5, 3.0])])
    rng.shuffle(words)
    symbols = list(rng.integers(0, 7, size=2000))
    records = [{"a": float(g), "c": c} for g, c in zip(rng.normal(size=3000), words[:3000])]
    counts = np.concatenate([NegativeBinomialDistribution(0.7, 0.05).sampler(1).sample(2000),
                             NegativeBinomialDistribution(40.0, 0.8).sampler(2).sample(2000)])
    angles = np.concatenate([VonMisesDistribution(3.1, 5e4).sampler(1).sample(1500),
                             VonMisesDistribution(-1.0, 0.8).sampler(2).sample(1500),
                             VonMisesDistribution(0.5, 30.0).sampler(3).sample(1000)])
    parts = np.concatenate([DirichletDistribution([0.3, 0.5, 0.4, 2.0]).sampler(1).sample(1500),
                            DirichletDistribution([50.0, 20.0, 30.0, 40.0]).sampler(2)
                            .sample(1500)])
    p1, p2 = rng.dirichlet(np.full(30, 0.3)), rng.dirichlet(np.full(30, 2.0))
    bags = np.concatenate([rng.multinomial(20, p1, size=800), rng.multinomial(5, p2, size=800)])
    return dict(levels=levels, words=words, symbols=symbols, records=records, counts=counts,
                angles=angles, parts=parts, p1=p1, p2=p2, bags=bags, rng=rng)


def _fits(d):
    """(family, case) -> fitted model."""
    def mix(est, k):
        return MixtureEstimator([est] * k)

    bag_rows = [{f"t{j:02d}": int(r[j]) for j in np.flatnonzero(r)} for r in d["bags"]]
    record = RecordEstimator({"a": GaussianEstimator(), "c": CategoricalEstimator()})
    return {
        ("categorical", "mixture"): lambda: _fit(d["words"], mix(CategoricalEstimator(
            pseudo_count=0.1), 3)),
        ("categorical", "float32"): lambda: _fit(d["words"], mix(CategoricalEstimator(
            pseudo_count=0.1), 3), precision="float32"),
        ("categorical", "int levels, prior"): lambda: _fit(d["symbols"], mix(CategoricalEstimator(
            prior=1.5), 2)),
        ("categorical", "record"): lambda: _fit(d["records"], mix(record, 2)),
        ("negative_binomial", "mixture"): lambda: _fit(d["counts"], mix(
            NegativeBinomialEstimator(), 2), max_iter=60),
        ("negative_binomial", "single"): lambda: _fit(d["counts"], NegativeBinomialEstimator(),
                                                      max_iter=200),
        ("von_mises", "mixture"): lambda: _fit(d["angles"], mix(VonMisesEstimator(), 3),
                                               max_iter=60),
        ("von_mises", "single"): lambda: _fit(d["angles"][:1500], VonMisesEstimator()),
        ("dirichlet", "mixture"): lambda: _fit(d["parts"], mix(DirichletEstimator(), 2),
                                               max_iter=40),
        ("dirichlet", "single"): lambda: _fit(d["parts"][1500:], DirichletEstimator()),
        ("multinomial", "bags"): lambda: _fit(bag_rows, mix(MultinomialEstimator(
            pseudo_count=0.5), 2)),
        ("multinomial", "sparse"): lambda: _fit(scipy.sparse.csr_matrix(d["bags"]), mix(
            MultinomialEstimator(prior=1.2), 2)),
        ("multinomial", "dense"): lambda: _fit(d["bags"].astype(float), mix(
            MultinomialEstimator(), 2)),
    }


def _scored(d):
    """(family, case) -> (components, raw rows) scored one by one and stacked."""
    rng = np.random.default_rng(11)
    pair = [MultinomialDistribution(d["p1"]), MultinomialDistribution(d["p2"])]
    return {
        "categorical": ([CategoricalDistribution(rng.dirichlet(np.ones(40)), levels=d["levels"])
                         for _ in range(3)], d["words"][:500]),
        "von_mises": ([VonMisesDistribution(3.1, 5e4), VonMisesDistribution(-1.0, 0.8),
                       VonMisesDistribution(0.5, 30.0)], d["angles"][::7]),
        "negative_binomial": ([NegativeBinomialDistribution(0.7, 0.05),
                               NegativeBinomialDistribution(40.0, 0.8)], d["counts"][::5]),
        "dirichlet": ([DirichletDistribution([0.3, 0.5, 0.4, 2.0]),
                       DirichletDistribution([50.0, 20.0, 30.0, 40.0])], d["parts"][::5]),
        "multinomial": (pair, d["bags"][::5].astype(float)),
        "multinomial sparse": (pair, scipy.sparse.csr_matrix(d["bags"][::5])),
    }


def _score_digests(comps, rows) -> dict[str, str]:
    enc = comps[0].encoder().encode(rows)
    out = {}
    for precision in ("float64", "float32"):
        out[f"{precision} one"] = digest_scores(np.stack([c.seq_log_density(enc, precision)
                                                           for c in comps]))
        if hasattr(type(comps[0]), "stack_log_density"):
            out[f"{precision} stacked"] = digest_scores(
                type(comps[0]).stack_log_density(comps, enc, precision))
    return out


FITS = list(_fits(_data()))
SCORES = list(_scored(_data()))


@pytest.fixture(scope="module")
def data():
    return _data()


@pytest.mark.parametrize("family, case", FITS, ids=[f"{f}-{c}" for f, c in FITS])
def test_fit_is_bit_identical_to_before_the_short_form(data, family, case):
    model = _fits(data)[family, case]()
    assert digest_model(model) == PINNED[f"{family}: {case}"]


@pytest.mark.parametrize("family", SCORES)
def test_scores_are_bit_identical_to_before_the_short_form(data, family):
    comps, rows = _scored(data)[family]
    digests = _score_digests(comps, rows)
    assert digests == {k: PINNED[f"{family} scores: {k}"] for k in digests}


if __name__ == "__main__":
    print(json.dumps(all_digests(_fits(_data()), _scored(_data()), _score_digests), indent=4))
