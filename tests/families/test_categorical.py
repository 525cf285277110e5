import numpy as np
import pytest

import mixfold
from mixfold import CategoricalDistribution, CategoricalEstimator, DataError
from mixfold.families.categorical import CategoricalEncoder


def test_log_density_is_log_prob():
    d = CategoricalDistribution({"a": 0.2, "b": 0.5, "c": 0.3})
    enc = d.encoder().encode(["c", "a", "b", "b"])
    np.testing.assert_allclose(d.seq_log_density(enc), np.log([0.3, 0.2, 0.5, 0.5]), rtol=1e-15)


@pytest.mark.parametrize("levels", [["x", "y", "z"], [3, 1, 2], [(1, "a"), (2, "b"), ("z",)],
                                    [True, "maybe", 7]])
def test_any_hashable_levels_fit_and_round_trip(levels, rng):
    probs = np.array([0.5, 0.3, 0.2])
    truth = CategoricalDistribution(probs, levels=levels)
    x = truth.sampler(1).sample(40_000)
    fit = mixfold.optimize(x, CategoricalEstimator(), progress=False)
    for level, p in zip(levels, probs):
        assert fit.prob(level) == pytest.approx(p, abs=0.01)  # se ~ 0.0025
    assert CategoricalDistribution.from_dict(fit.to_dict()) == fit
    loaded = mixfold.Distribution.from_dict(fit.to_dict())
    assert set(loaded.levels) == set(levels)


def test_levels_learned_sorted_and_numpy_fast_path_matches_slow_path():
    values = np.array(["b", "c", "a", "c"])
    enc = CategoricalEncoder().fit(values)
    assert enc.levels == ("a", "b", "c")
    np.testing.assert_array_equal(enc.encode(values).values, enc.encode(list(values)).values)


def test_unseen_level_at_scoring_time_names_the_row():
    d = CategoricalDistribution({"a": 0.5, "b": 0.5})
    with pytest.raises(DataError) as err:
        d.encoder().encode(["a", "b", "zzz"])
    assert err.value.row == 2 and "zzz" in str(err.value)
    with pytest.raises(DataError) as err:
        d.encoder().encode(np.array(["a", "q"]))
    assert err.value.row == 1


def test_missing_value_points_to_optional():
    with pytest.raises(DataError, match="OptionalEstimator") as err:
        mixfold.optimize(["a", None], CategoricalEstimator(), progress=False)
    assert err.value.row == 1


def test_pseudo_count_keeps_unobserved_levels_positive():
    fit = mixfold.optimize(["a"] * 10, CategoricalEstimator(levels=["a", "b"], pseudo_count=1.0),
                           progress=False)
    assert fit.prob("b") == pytest.approx(1 / 12)


def test_fixed_levels_reject_other_values():
    with pytest.raises(DataError) as err:
        mixfold.optimize(["a", "c"], CategoricalEstimator(levels=["a", "b"]), progress=False)
    assert err.value.row == 1


def test_an_unseen_level_of_another_type_says_so():
    from mixfold import CategoricalDistribution, DataError

    model = CategoricalDistribution({"2.0": 0.5, "3.5": 0.5})
    with pytest.raises(DataError, match="level 3.5 is not among .*; the value is a float, the "
                                        "levels are str"):
        model.seq_log_density([3.5])
