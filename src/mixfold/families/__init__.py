"""The families: one module per family, each with its Distribution, Encoder, Accumulator and
Estimator; the roles themselves are in :mod:`mixfold.families._protocol`."""

from mixfold.families._protocol import (Accumulator, AccumulatorFactory, ArrayEncoded, Distribution,
                                        Encoded, Encoder, Estimator, InitRandom, Sampler)
from mixfold.families.categorical import CategoricalDistribution, CategoricalEstimator
from mixfold.families.composite import (CompositeDistribution, CompositeEstimator,
                                        RecordDistribution, RecordEstimator)
from mixfold.families.gaussian import GaussianDistribution, GaussianEstimator
from mixfold.families.mixture import MixtureDistribution, MixtureEstimator

__all__ = [
    "Accumulator", "AccumulatorFactory", "ArrayEncoded", "Distribution", "Encoded", "Encoder",
    "Estimator", "InitRandom", "Sampler",
    "CategoricalDistribution", "CategoricalEstimator",
    "CompositeDistribution", "CompositeEstimator", "RecordDistribution", "RecordEstimator",
    "GaussianDistribution", "GaussianEstimator",
    "MixtureDistribution", "MixtureEstimator",
]
