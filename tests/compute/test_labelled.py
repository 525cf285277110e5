"""Labelled rows (compute/labelled.py): the prior rides with its rows through every slice,
take and concatenation a backend applies, per row and per item of a sequence."""

import numpy as np

from mixfold import GaussianEstimator, SequenceEstimator
from mixfold.compute.encoded import ArrayEncoded
from mixfold.compute.labelled import Labelled


def _per_row():
    prior = np.arange(10.0).reshape(5, 2)
    return Labelled(ArrayEncoded(np.arange(5.0) * 10), prior), prior


def test_rows_take_and_concat_keep_each_row_with_its_prior():
    enc, prior = _per_row()
    part = enc.rows(1, 4)
    assert part.inner.values.tolist() == [10.0, 20.0, 30.0] and part.start == 1
    np.testing.assert_array_equal(part.prior, prior[1:4])
    picked = enc.take(np.array([4, 0, 2]))
    np.testing.assert_array_equal(picked.prior, prior[[4, 0, 2]])
    assert picked.inner.values.tolist() == [40.0, 0.0, 20.0]
    whole = Labelled.concat([enc.rows(0, 2), enc.rows(2, 5)])
    np.testing.assert_array_equal(whole.prior, prior)
    assert whole.inner.values.tolist() == enc.inner.values.tolist()
    assert whole.nbytes == enc.inner.nbytes + prior.nbytes


def test_a_sequence_prior_follows_its_items():
    rows = [[1.0, 2.0], [], [3.0, 4.0, 5.0], [6.0]]
    inner = SequenceEstimator(GaussianEstimator()).encoder().encode(rows)
    prior = np.arange(12.0).reshape(6, 2)  # one row per item, in flat order
    enc = Labelled(inner, prior, per_item=True)
    part = enc.rows(2, 4)  # rows 2 and 3: items 2..5
    np.testing.assert_array_equal(part.prior, prior[2:6])
    picked = enc.take(np.array([3, 0]))  # items of row 3, then of row 0
    np.testing.assert_array_equal(picked.prior, prior[[5, 0, 1]])
    assert picked.n_rows == 2


def test_log_prior_rules_out_what_a_label_excludes():
    enc = Labelled(ArrayEncoded(np.zeros(2)), np.array([[1.0, 0.0], [0.25, 0.75]]))
    got = enc.log_prior()
    assert got[0, 1] == -np.inf and got[0, 0] == 0.0
    np.testing.assert_allclose(got[1], np.log([0.25, 0.75]))
