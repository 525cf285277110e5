"""Double-double statistics make the fit independent of how the rows are split."""

import pytest

import mixfold
from mixfold.parallel.heterogeneous import Worker
from tests.backends.cases import CASES


def dd_fit(case, workers=None, **extra):
    rows, est, options = CASES[case]()
    pool = None if workers is None else [Worker(f"w{i}", precisions=("dd",))
                                         for i in range(workers)]
    return mixfold.fit(rows, est, precision="dd", resources=pool, progress=False,
                       **{**options, **extra})


def test_dd_gives_bit_identical_parameters_for_1_2_4_and_8_shards():
    reference = dd_fit("gmm")
    for workers in (1, 2, 4, 8):
        res = dd_fit("gmm", workers)
        assert [a.rows for a in res.plan.assignments] == [4000 // workers] * workers
        assert res.model.to_dict() == reference.model.to_dict(), workers
        assert res.log_likelihood == reference.log_likelihood
    assert dd_fit("gmm", chunk_rows=333).model.to_dict() == reference.model.to_dict()


def test_float64_is_not_shard_independent_here_but_close():
    rows, est, options = CASES["gmm"]()
    one = mixfold.fit(rows, est, progress=False, **options)
    pool = [Worker(f"w{i}", precisions=("float64",)) for i in range(8)]
    eight = mixfold.fit(rows, est, resources=pool, precision="float64", progress=False,
                        **options)
    assert eight.model.to_dict() != one.model.to_dict()  # round-off depends on the split
    for a, b in zip(eight.model.components, one.model.components):
        assert a.mu == pytest.approx(b.mu, rel=1e-12)
