"""The families of [families-2] together: a mixture of records of all of them (the latent-scale
families fold per component, the linear ones in the fused E-step), in float64 and float32."""

import numpy as np
import pytest

import mixfold
from mixfold import (BetaEstimator, DirichletEstimator, MixtureEstimator, MultinomialEstimator,
                     NegativeBinomialEstimator, PoissonEstimator, RecordEstimator,
                     StudentTEstimator, WeibullEstimator, ZeroInflatedEstimator)
from mixfold.capabilities import LinearInFeatures, StackedScoring, StackedUpdate
from mixfold.families.beta import BetaAccumulator
from mixfold.families.dirichlet import DirichletAccumulator
from mixfold.families.multinomial import MultinomialAccumulator


def segment_rows(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    seg = rng.integers(0, 2, n)
    rows = [{"share": float(rng.beta(2, 8) if s else rng.beta(8, 2)),
             "words": ["a"] * int(rng.integers(1, 5)) + ["b"] if s else ["c", "c", "b"],
             "n": int(rng.negative_binomial(2, 0.3 if s else 0.05)),
             "t": float(rng.weibull(2.0) * (1 if s else 5)),
             "z": int(0 if rng.random() < 0.3 else rng.poisson(3 if s else 9)),
             "st": float(rng.standard_t(3) + 10 * s),
             "comp": list(rng.dirichlet([5, 1, 1] if s else [1, 1, 5]))} for s in seg]
    return rows, seg


def record():
    return RecordEstimator({"share": BetaEstimator(), "words": MultinomialEstimator(),
                            "n": NegativeBinomialEstimator(), "t": WeibullEstimator(),
                            "z": ZeroInflatedEstimator(PoissonEstimator()),
                            "st": StudentTEstimator(), "comp": DirichletEstimator()})


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_mixture_of_records_of_every_new_family_finds_the_segments(precision):
    rows, seg = segment_rows()
    res = mixfold.fit(rows, MixtureEstimator([record(), record()]), max_iter=30, seed=0,
                      progress=False, precision=precision)
    ll = np.asarray(res.log_likelihood)
    assert (np.diff(ll) >= -1e-6 * np.abs(ll[1:])).all()
    comps = sorted(res.model.components, key=lambda c: c.fields["st"].mu)
    assert [c.fields["st"].mu for c in comps] == pytest.approx([0.0, 10.0], abs=0.3)
    assert res.model.weights.min() == pytest.approx(np.mean(seg), abs=0.05) or \
        res.model.weights.min() == pytest.approx(1 - np.mean(seg), abs=0.05)
    assert [c.fields["share"].mean for c in comps] == pytest.approx([0.8, 0.2], abs=0.03)
    # Beta 2, Multinomial 2 (3 levels), NB 2, Weibull 2, ZI Poisson 2, Student t 3, Dirichlet 3
    assert res.model.n_parameters() == 2 * (2 + 2 + 2 + 2 + 2 + 3 + 3) + 1


def test_linear_families_fuse_and_latent_scale_families_do_not_claim_stacked_updates():
    for acc in (BetaAccumulator, DirichletAccumulator, MultinomialAccumulator):
        assert issubclass(acc, LinearInFeatures) and issubclass(acc, StackedUpdate)
    # a family whose E-step sums need its current parameters cannot be updated K at once from
    # responsibilities alone, so it does not offer stacked scoring (records would stack it)
    for dist in (mixfold.NegativeBinomialDistribution, mixfold.StudentTDistribution,
                 mixfold.WeibullDistribution, mixfold.ZeroInflatedDistribution):
        assert not issubclass(dist, StackedScoring)
