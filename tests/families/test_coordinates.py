"""A combinator's dict form and free-parameter count derived from its parameter_coordinates
(families/_coordinates.py): the JSON written before it was derived, and counts by hand."""

import json

import numpy as np
import pytest

import mixfold
from mixfold import CategoricalDistribution, GaussianDistribution, PoissonDistribution
from mixfold.families._protocol import Distribution
from mixfold.families.hidden_semi_markov import HiddenSemiMarkovDistribution
from mixfold.families.markov_chain import MarkovChainDistribution
from mixfold.families.sequence import SequenceDistribution

LENGTH = CategoricalDistribution({1: 0.25, 4: 0.75})
SEQUENCE = SequenceDistribution(GaussianDistribution(1.0, 2.0), LENGTH)
CHAIN = MarkovChainDistribution([0.25, 0.75], [[0.5, 0.5], [0.125, 0.875]],
                                levels=["a", ("b", 1)], length=PoissonDistribution(3.0))
HSMM = HiddenSemiMarkovDistribution([GaussianDistribution(0, 1), GaussianDistribution(3, 1)],
                                    [PoissonDistribution(2.0), LENGTH], [0.5, 0.5],
                                    [[0.0, 1.0], [1.0, 0.0]], max_duration=6)


def test_the_dict_forms_are_as_written_before():
    assert SEQUENCE.to_dict() == {"family": "Sequence", "item": GaussianDistribution(1.0, 2.0)
                                  .to_dict(), "length": LENGTH.to_dict()}
    assert list(CHAIN.to_dict()) == ["family", "levels", "initial", "transitions", "length"]
    assert CHAIN.to_dict()["levels"] == json.loads(json.dumps(CHAIN.to_dict()))["levels"]
    assert list(HSMM.to_dict()) == ["family", "emissions", "durations", "initial",
                                    "transitions", "max_duration"]
    assert HSMM.to_dict()["max_duration"] == 6
    no_length = SequenceDistribution(PoissonDistribution(1.0)).to_dict()
    assert no_length["length"] is None
    del no_length["length"]  # a file without the optional part still reads
    assert Distribution.from_dict(no_length) == SequenceDistribution(PoissonDistribution(1.0))


@pytest.mark.parametrize("model", [SEQUENCE, CHAIN, HSMM])
def test_a_model_goes_through_a_model_file_unchanged(model, tmp_path):
    mixfold.save(model, tmp_path / "m.json")
    back = mixfold.load(tmp_path / "m.json")
    assert back == model and repr(back) == repr(model)
    assert back.seq_log_density(model.sampler(0, sample_length=4).sample(3)).tolist() == \
        model.seq_log_density(model.sampler(0, sample_length=4).sample(3)).tolist()


def test_the_free_parameters_are_counted_from_the_coordinates():
    assert SEQUENCE.n_parameters() == 2 + 1
    assert SequenceDistribution(GaussianDistribution(0, 1)).n_parameters() == 2
    assert CHAIN.n_parameters() == 1 + 2 + 1  # initial, two rows of transitions, the Poisson
    # the semi-Markov chain's diagonal is not free: S - 1 + S (S - 2) and its parts
    assert HSMM.n_parameters() == 1 + 0 + 4 + 1 + 1
    assert np.isclose(CHAIN.initial.sum(), 1.0)
