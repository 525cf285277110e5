"""The families: one module per family, each with its Distribution and Estimator (and where it
needs them its own Encoder and Accumulator); the contract they are written against is
:mod:`mixfold.families.contract`."""

from mixfold.families._protocol import (Accumulator, AccumulatorFactory, ArrayEncoded, Distribution,
                                        Encoded, Encoder, Estimator, InitRandom, Sampler)
from mixfold.families.beta import BetaDistribution, BetaEstimator
from mixfold.families.bernoulli import BernoulliDistribution, BernoulliEstimator
from mixfold.families.binomial import BinomialDistribution, BinomialEstimator
from mixfold.families.categorical import CategoricalDistribution, CategoricalEstimator
from mixfold.families.censored import CensoredDistribution, CensoredEstimator, survival_rows
from mixfold.families.composite import (CompositeDistribution, CompositeEstimator,
                                        RecordDistribution, RecordEstimator)
from mixfold.families.diagonal_gaussian import (DiagonalGaussianDistribution,
                                                DiagonalGaussianEstimator)
from mixfold.families.dirichlet import DirichletDistribution, DirichletEstimator
from mixfold.families.exponential import ExponentialDistribution, ExponentialEstimator
from mixfold.families.gamma import GammaDistribution, GammaEstimator
from mixfold.families.gaussian import GaussianDistribution, GaussianEstimator
from mixfold.families.geometric import GeometricDistribution, GeometricEstimator
from mixfold.families.hidden_markov import HiddenMarkovDistribution, HiddenMarkovEstimator
from mixfold.families.hidden_semi_markov import (HiddenSemiMarkovDistribution,
                                                 HiddenSemiMarkovEstimator)
from mixfold.families.lda import LDADistribution, LDAEstimator
from mixfold.families.markov_chain import MarkovChainDistribution, MarkovChainEstimator
from mixfold.families.log_gaussian import LogGaussianDistribution, LogGaussianEstimator
from mixfold.families.mixture import MixtureDistribution, MixtureEstimator
from mixfold.families.multivariate_gaussian import (MultivariateGaussianDistribution,
                                                    MultivariateGaussianEstimator)
from mixfold.families.multivariate_student_t import (MultivariateStudentTDistribution,
                                                     MultivariateStudentTEstimator)
from mixfold.families.multinomial import MultinomialDistribution, MultinomialEstimator
from mixfold.families.negative_binomial import (NegativeBinomialDistribution,
                                                NegativeBinomialEstimator)
from mixfold.families.optional import OptionalDistribution, OptionalEstimator
from mixfold.families.poisson import PoissonDistribution, PoissonEstimator
from mixfold.families.sequence import SequenceDistribution, SequenceEstimator
from mixfold.families.student_t import StudentTDistribution, StudentTEstimator
from mixfold.families.von_mises import VonMisesDistribution, VonMisesEstimator
from mixfold.families.weibull import WeibullDistribution, WeibullEstimator
from mixfold.families.zero_inflated import ZeroInflatedDistribution, ZeroInflatedEstimator
from mixfold.families.variational_mixture import (VariationalMixtureDistribution,
                                                  VariationalMixtureEstimator)

__all__ = [
    "Accumulator", "AccumulatorFactory", "ArrayEncoded", "Distribution", "Encoded", "Encoder",
    "Estimator", "InitRandom", "Sampler", "BernoulliDistribution", "BernoulliEstimator",
    "BinomialDistribution", "BinomialEstimator", "CategoricalDistribution",
    "CategoricalEstimator", "CompositeDistribution", "CompositeEstimator",
    "DiagonalGaussianDistribution", "DiagonalGaussianEstimator", "RecordDistribution",
    "RecordEstimator", "ExponentialDistribution", "ExponentialEstimator", "GammaDistribution",
    "GammaEstimator", "GaussianDistribution", "GaussianEstimator", "GeometricDistribution",
    "GeometricEstimator", "HiddenMarkovDistribution", "HiddenMarkovEstimator",
    "LDADistribution", "LDAEstimator", "LogGaussianDistribution", "LogGaussianEstimator",
    "MixtureDistribution",
    "MixtureEstimator", "MultivariateGaussianDistribution", "MultivariateGaussianEstimator",
    "MultivariateStudentTDistribution", "MultivariateStudentTEstimator",
    "CensoredDistribution", "CensoredEstimator", "survival_rows",
    "NegativeBinomialDistribution", "NegativeBinomialEstimator", "BetaDistribution",
    "BetaEstimator", "DirichletDistribution", "DirichletEstimator", "MultinomialDistribution",
    "MultinomialEstimator", "StudentTDistribution", "StudentTEstimator", "WeibullDistribution",
    "WeibullEstimator", "ZeroInflatedDistribution", "ZeroInflatedEstimator",
    "OptionalDistribution", "OptionalEstimator", "PoissonDistribution", "PoissonEstimator",
    "SequenceDistribution", "SequenceEstimator", "VonMisesDistribution", "VonMisesEstimator",
    "VariationalMixtureDistribution", "VariationalMixtureEstimator",
    "MarkovChainDistribution", "MarkovChainEstimator", "HiddenSemiMarkovDistribution",
    "HiddenSemiMarkovEstimator",
]
