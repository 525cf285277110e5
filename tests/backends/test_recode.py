"""Batches encoded with their own vocabularies and mapped onto the merged ones equal the
batches encoded with the merged vocabularies (backends/_recode.py)."""

import numpy as np
import pytest

import mixfold
from mixfold.backends._partitions import merge_encoders
from mixfold.backends._recode import (Unmappable, batch_encoder, code_map, learns_in_pass,
                                      recoded)
from mixfold.families._levels import CategoricalEncoder
from mixfold.families._record_encoding import CompositeEncoder


def encoded_arrays(enc):
    """Every array of an encoding, depth first (what a fold reads)."""
    if hasattr(enc, "children"):
        return [a for c in enc.children for a in encoded_arrays(c)]
    if hasattr(enc, "inner"):
        return [enc.present, enc.before] + encoded_arrays(enc.inner)
    return [enc.values]


def test_batches_mapped_onto_the_merge_equal_the_merged_encoding():
    est = mixfold.RecordEstimator({
        "c": mixfold.CategoricalEstimator(),
        "o": mixfold.OptionalEstimator(mixfold.CategoricalEstimator()),
        "n": mixfold.CategoricalEstimator(),
        "x": mixfold.GaussianEstimator()})
    base = est.encoder()
    assert learns_in_pass(base)
    batches = [
        {"c": ["b", "b", "d"], "o": [None, None, None], "n": [3, 1, 3], "x": [0.1, 0.2, 0.3]},
        {"c": ["a", "d", "a"], "o": ["q", None, "p"], "n": [2, 2, 2], "x": [1.0, 2.0, 3.0]},
        {"c": ["z", "b", "a"], "o": ["p", "p", None], "n": [1, 7, 3], "x": [4.0, 5.0, 6.0]},
    ]
    fitted = [base.fit(b) for b in batches]
    merged = merge_encoders(*fitted)
    assert merged == base.fit({k: sum((b[k] for b in batches), []) for k in batches[0]})
    for batch, own in zip(batches, fitted):
        mapped = recoded(batch_encoder(own).encode(batch), code_map(own, merged))
        for got, want in zip(encoded_arrays(mapped), encoded_arrays(merged.encode(batch))):
            np.testing.assert_array_equal(got, want)


def test_a_batch_with_the_merged_levels_keeps_its_codes():
    enc = CompositeEncoder([CategoricalEncoder(["a", "b"])])
    assert code_map(enc, enc) is None


def test_encoders_that_learn_more_than_levels_are_left_to_the_sample():
    assert not learns_in_pass(mixfold.LDAEstimator(3).encoder())
    assert learns_in_pass(mixfold.MultivariateGaussianEstimator().encoder())  # from any row
    assert not learns_in_pass(mixfold.OptionalEstimator(  # a batch may have no row
        mixfold.MultivariateGaussianEstimator()).encoder())
    assert learns_in_pass(mixfold.OptionalEstimator(
        mixfold.MultivariateGaussianEstimator(dim=2)).encoder())
    with pytest.raises(Unmappable):
        code_map(mixfold.LDAEstimator(3, vocabulary=["a"]).encoder(),
                 mixfold.LDAEstimator(3, vocabulary=["a", "b"]).encoder())
