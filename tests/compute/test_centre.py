"""compute/centre.py against NumPy's weighted averages: plain rows, rows missing entries, rows
without weight, no rows, and rows whose sums overflow."""

import numpy as np

from mixfold.compute.centre import weighted_centre


def test_the_centre_is_the_weighted_mean():
    rng = np.random.default_rng(0)
    x, w = rng.normal(5.0, 2.0, (200, 3)), rng.uniform(0, 3, 200)
    np.testing.assert_allclose(weighted_centre(x, w), np.average(x, axis=0, weights=w),
                               rtol=1e-14)
    np.testing.assert_allclose(weighted_centre(x[:, 0], w), [np.average(x[:, 0], weights=w)],
                               rtol=1e-14)


def test_missing_entries_are_left_out_of_their_coordinate():
    x = np.array([[1.0, np.nan], [3.0, 4.0], [np.nan, 8.0], [5.0, np.nan]])
    w = np.array([1.0, 2.0, 1.0, 1.0])
    seen = ~np.isnan(x)
    want = [np.average(x[seen[:, j], j], weights=w[seen[:, j]]) for j in range(2)]
    np.testing.assert_allclose(weighted_centre(x, w), want, rtol=1e-15)
    # a coordinate no row has sits at 0
    assert weighted_centre(np.array([[1.0, np.nan]]), np.ones(1)).tolist() == [1.0, 0.0]


def test_rows_without_weight_or_without_rows():
    x = np.array([[2.0, -1.0], [7.0, 3.0]])
    assert weighted_centre(x, np.zeros(2)).tolist() == [2.0, -1.0]  # the first row
    assert weighted_centre(np.zeros((0, 3)), np.zeros(0)).tolist() == [0.0, 0.0, 0.0]
    assert weighted_centre(np.zeros(0), np.zeros(0)).tolist() == [0.0]


def test_rows_whose_sum_overflows_keep_a_centre_in_their_range():
    x = np.array([[1e308, 1.0], [1e308, 3.0]])
    c = weighted_centre(x, np.array([1e10, 1e10]))
    assert np.isfinite(c).all() and 0 < c[0] <= 1e308
    assert c[1] == 2.0
