"""A hidden semi-Markov state's duration law (families/_durations.py) against scipy's laws
truncated to 1..D by hand."""

import numpy as np
import pytest
from scipy import stats

from mixfold import (CategoricalDistribution, CategoricalEstimator, NegativeBinomialDistribution,
                     PoissonDistribution, PoissonEstimator)
from mixfold.errors import ParameterError
from mixfold.families._durations import (bound_durations, duration_log_probabilities,
                                         encoded_durations)


def test_a_count_law_is_the_law_of_the_steps_after_the_first_truncated():
    want = stats.poisson(3.0).pmf(np.arange(6))
    got = np.exp(duration_log_probabilities(PoissonDistribution(3.0), 6))
    np.testing.assert_allclose(got, want / want.sum(), rtol=1e-12)
    nb = NegativeBinomialDistribution(2.0, 0.4)
    got = np.exp(duration_log_probabilities(nb, 5))
    assert got.sum() == pytest.approx(1.0) and got.shape == (5,)


def test_a_categorical_reads_its_levels_as_the_durations_outside_ones_left_out():
    law = CategoricalDistribution({0: 0.2, 2: 0.4, 3: 0.2, 9: 0.2})
    got = np.exp(duration_log_probabilities(law, 4))
    np.testing.assert_allclose(got, [0.0, 2 / 3, 1 / 3, 0.0], atol=1e-15)
    with pytest.raises(ParameterError, match="gives no probability to 1..4"):
        duration_log_probabilities(CategoricalDistribution({7: 1.0}), 4)


def test_the_duration_estimators_read_the_values_of_their_family():
    cat, poisson = bound_durations([CategoricalEstimator(), PoissonEstimator()], 3)
    assert cat.levels == (1, 2, 3)
    assert encoded_durations(cat, 3).values.tolist() == [0, 1, 2]  # codes of the levels 1..3
    assert encoded_durations(poisson, 3).values.tolist() == [0.0, 1.0, 2.0]  # steps after one
