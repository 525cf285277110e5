"""A sequence family's optional length law (families/_length_law.py), as Sequence and
MarkovChain share it: lengths drawn from it or fixed, its expected value, its encoder and
bound estimator."""

import numpy as np
import pytest

from mixfold import (CategoricalDistribution, CategoricalEstimator, GaussianDistribution,
                     PoissonDistribution, PoissonEstimator)
from mixfold.families._length_law import (bound_length, drawn_lengths, expected_length,
                                          length_encoder)
from mixfold.families.markov_chain import MarkovChainDistribution
from mixfold.families.sequence import SequenceDistribution

CHAIN = MarkovChainDistribution([0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]], levels=["a", "b"])
ITEMS = SequenceDistribution(CategoricalDistribution({"a": 0.5, "b": 0.5}))


@pytest.mark.parametrize("model", [CHAIN, ITEMS])
def test_the_lengths_are_drawn_from_the_law(model):
    law = CategoricalDistribution({0: 0.2, 3: 0.8})
    with_law = type(model).from_dict({**model.to_dict(), "length": law.to_dict()})
    rows = with_law.sampler(0).sample(4000)
    lengths = np.array([len(r) for r in rows])
    assert set(lengths.tolist()) == {0, 3}
    assert (lengths == 3).mean() == pytest.approx(0.8, abs=0.02)
    # the same rows as a fixed law drawing the same lengths would give
    assert with_law.sampler(1).sample(5) == with_law.sampler(1).sample(5)


@pytest.mark.parametrize("model", [CHAIN, ITEMS])
def test_a_fixed_length_overrides_the_law_and_is_required_without_one(model):
    assert [len(r) for r in model.sampler(0, sample_length=6).sample(3)] == [6, 6, 6]
    with pytest.raises(ValueError, match=f"this {type(model).__name__} has no length law"):
        model.sampler(0).sample(1)
    with pytest.raises(ValueError, match="sample_length must be an integer >= 0, got 2.5"):
        model.sampler(0, sample_length=2.5)


def test_a_law_drawing_other_than_counts_is_refused_naming_it():
    with pytest.raises(ValueError, match="the length law GaussianDistribution.* must draw "
                                         "integers >= 0"):
        drawn_lengths(GaussianDistribution(3.0, 1.0), 4, np.random.default_rng(0))
    assert drawn_lengths(PoissonDistribution(2.0), 3, np.random.default_rng(0)).dtype == np.int64


def test_expected_length():
    assert expected_length(None) == 1.0
    assert expected_length(CategoricalDistribution({1: 0.5, 5: 0.5})) == 3.0
    assert expected_length(PoissonDistribution(4.0)) == pytest.approx(4.0, rel=0.1)


def test_the_lengths_encoder_and_bound_estimator():
    assert length_encoder(None) is None
    enc = length_encoder(CategoricalEstimator()).fit([2, 0, 2])
    assert bound_length(CategoricalEstimator(), enc).levels == (0, 2)
    assert bound_length(None, None) is None
    with pytest.raises(ValueError, match="disagree on whether the sequence length is modelled"):
        bound_length(PoissonEstimator(), None)
