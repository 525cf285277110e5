"""Malformed input, fuzzed: every case ends in mixfold's own error or a valid, finite model.

Rows mix valid values of each family's domain with NaN, inf, huge and tiny numbers, None,
strings, bytes, bools, complex numbers, nested lists and dicts; records lose or gain fields;
vectors and tuples are ragged; weights are negative, NaN or of the wrong length. The fit must
either raise :class:`~mixfold.DataError` (naming a row inside the data when the problem is one
row) or :class:`~mixfold.NumericalError`, or return a model whose every parameter and whose
log-likelihood trace are finite. Anything else — a TypeError from inside NumPy, a NaN
parameter — fails. The default run draws a few dozen examples per test; the ``slow`` variants
draw ten times as many.
"""

import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mixfold
from mixfold import (
    BernoulliEstimator,
    BetaEstimator,
    BinomialEstimator,
    CategoricalDistribution,
    CategoricalEstimator,
    CompositeEstimator,
    DataError,
    DiagonalGaussianEstimator,
    DirichletEstimator,
    ExponentialEstimator,
    GammaEstimator,
    GaussianEstimator,
    GeometricEstimator,
    HiddenMarkovEstimator,
    LDAEstimator,
    LogGaussianEstimator,
    MixtureEstimator,
    MultinomialEstimator,
    MultivariateGaussianEstimator,
    NegativeBinomialEstimator,
    NumericalError,
    OptionalEstimator,
    PoissonEstimator,
    RecordEstimator,
    SequenceEstimator,
    StudentTEstimator,
    VonMisesEstimator,
    WeibullEstimator,
    ZeroInflatedEstimator,
)

from .models import parameter_arrays

FAST, SLOW = 40, 400
#: every fuzz test runs small by default and ten times bigger under the slow marker
SIZES = pytest.mark.parametrize("examples", [
    pytest.param(FAST, id="fast"), pytest.param(SLOW, id="long", marks=pytest.mark.slow)])
OUTCOMES: dict[str, int] = {"error": 0, "model": 0}


def fuzz(strategy, examples):
    """``@fuzz(strategy, n)`` on ``body(value)``: run ``body`` on ``n`` drawn values."""

    def wrap(body):
        # the default run is reproducible (derandomized); the long one explores afresh each time
        return settings(max_examples=examples, deadline=None, database=None,
                        derandomize=examples == FAST,
                        suppress_health_check=[HealthCheck.too_slow,
                                               HealthCheck.data_too_large])(given(strategy)(body))

    return wrap


def outcome(data, est, **options):
    """Fit; return "error" for mixfold's own error, "model" for a finite model; else fail."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # degenerate-fit warnings are expected here
            res = mixfold.fit(data, est, max_iter=3, progress=False, **options)
    except (DataError, NumericalError) as err:
        assert str(err)
        if isinstance(err, DataError) and err.row is not None:
            assert 0 <= err.row < len(data), (err.row, len(data))
        OUTCOMES["error"] += 1
        return "error"
    for path, values in parameter_arrays(res.model).items():
        assert np.isfinite(values).all(), (path, values)
    assert all(math.isfinite(v) for v in res.log_likelihood)
    OUTCOMES["model"] += 1
    return "model"


# ---------------------------------------------------------------------------------------------
# Values

weird = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 5e-324, -0.0,
                     np.float32("nan"), np.int64(-3), np.float64(1e300), complex(1, 2), 10**30,
                     -(10**30), True, None, "1.5", "", b"\x00", [1.0], [], {}, {"a": 1},
                     (1, 2), object.__name__]),
    st.integers(-(10**20), 10**20), st.none(), st.booleans(), st.text(max_size=3),
    st.lists(st.floats(), max_size=2),
)


@st.composite
def corrupted(draw, valid, min_size=0, max_size=30):
    """A list of valid values with up to three weird ones inserted (or none at all)."""
    rows = draw(st.lists(valid, min_size=min_size, max_size=max_size))
    for _ in range(draw(st.integers(0, 3))):
        rows.insert(draw(st.integers(0, len(rows))), draw(weird))
    if rows and draw(st.booleans()):
        try:  # the same rows as a NumPy array, when NumPy can make one
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return np.asarray(rows)
        except (ValueError, TypeError, OverflowError):
            return rows
    return rows


LEAVES = [
    ("Gaussian", GaussianEstimator, st.floats(-1e6, 1e6)),
    ("LogGaussian", LogGaussianEstimator, st.floats(1e-6, 1e6)),
    ("Exponential", ExponentialEstimator, st.floats(0, 1e6)),
    ("Gamma", GammaEstimator, st.floats(1e-6, 1e6)),
    ("VonMises", VonMisesEstimator, st.floats(-10, 10)),
    ("Poisson", PoissonEstimator, st.integers(0, 60)),
    ("Geometric", GeometricEstimator, st.integers(1, 30)),
    ("Binomial", lambda: BinomialEstimator(10), st.integers(0, 10)),
    ("Bernoulli", BernoulliEstimator, st.sampled_from([0, 1, True, False, 0.0, 1.0])),
    ("Categorical", CategoricalEstimator, st.sampled_from(["a", "b", 3, ("t", 1), 2.5])),
    ("NegativeBinomial", NegativeBinomialEstimator, st.integers(0, 10**6)),
    ("Beta", BetaEstimator, st.floats(1e-12, 1 - 1e-12)),
    ("StudentT", StudentTEstimator, st.floats(-1e6, 1e6)),
    ("StudentTFixedNu", lambda: StudentTEstimator(nu=1.5), st.floats(-1e6, 1e6)),
    ("Weibull", WeibullEstimator, st.floats(1e-6, 1e6)),
    ("ZeroInflatedPoisson", lambda: ZeroInflatedEstimator(PoissonEstimator()),
     st.integers(0, 60)),
    ("ZeroInflatedNegativeBinomial", lambda: ZeroInflatedEstimator(NegativeBinomialEstimator()),
     st.integers(0, 10**6)),
    ("LDA", lambda: LDAEstimator(2), st.one_of(
        st.lists(st.sampled_from(["a", "b", "c", 7]), max_size=6), st.text(max_size=12),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), st.floats(0, 1e6), max_size=3))),
]


@SIZES
@pytest.mark.parametrize("name, make, valid", LEAVES, ids=[c[0] for c in LEAVES])
def test_fuzz_leaf_rows(name, make, valid, examples):
    @fuzz(corrupted(valid), examples)
    def run(rows):
        outcome(rows, make())
        outcome(rows, MixtureEstimator([make(), make()]))

    run()


vectors = st.lists(st.floats(-1e3, 1e3), min_size=3, max_size=3)


@SIZES
@pytest.mark.parametrize("make", [DiagonalGaussianEstimator, MultivariateGaussianEstimator])
def test_fuzz_vector_rows(make, examples):
    ragged = st.one_of(vectors, st.lists(st.floats(-1e3, 1e3), max_size=4), weird,
                       st.lists(weird, min_size=3, max_size=3))

    @fuzz(st.one_of(corrupted(vectors, min_size=1), st.lists(ragged, max_size=12)), examples)
    def run(rows):
        outcome(rows, make())
        outcome(rows, MixtureEstimator([make(), make()]))

    run()


compositions = st.lists(st.floats(1e-9, 1e3), min_size=3, max_size=3).map(
    lambda v: [x / sum(v) for x in v])


@SIZES
def test_fuzz_composition_rows(examples):
    ragged = st.one_of(compositions, vectors, st.lists(st.floats(0, 1), max_size=4), weird)

    @fuzz(st.one_of(corrupted(compositions, min_size=1), st.lists(ragged, max_size=12)), examples)
    def run(rows):
        outcome(rows, DirichletEstimator())
        outcome(rows, MixtureEstimator([DirichletEstimator(), DirichletEstimator()]))

    run()


bags = st.one_of(st.lists(st.sampled_from(["a", "b", 3, ("t", 1)]), max_size=5),
                 st.dictionaries(st.sampled_from(["a", "b", 3]), st.integers(0, 10**6), max_size=3))


@SIZES
def test_fuzz_bag_rows(examples):
    @fuzz(st.one_of(corrupted(bags), st.lists(st.one_of(bags, weird), max_size=12)), examples)
    def run(rows):
        outcome(rows, MultinomialEstimator())
        outcome(rows, MixtureEstimator([MultinomialEstimator(), MultinomialEstimator()]))


holey = st.lists(st.one_of(st.floats(-1e3, 1e3), st.just(float("nan"))), min_size=3,
                max_size=3)


@SIZES
@pytest.mark.parametrize("make", [DiagonalGaussianEstimator, MultivariateGaussianEstimator])
def test_fuzz_vector_rows_with_missing_entries(make, examples):
    @fuzz(st.one_of(corrupted(holey, min_size=1), st.lists(holey, min_size=1, max_size=12)),
          examples)
    def run(rows):
        outcome(rows, make(missing=True))
        outcome(rows, MixtureEstimator([make(missing=True), make(missing=True)]))

    run()


def record_estimator():
    return RecordEstimator({
        "x": GaussianEstimator(), "c": CategoricalEstimator(), "n": PoissonEstimator(),
        "o": OptionalEstimator(LogGaussianEstimator()),
        "s": SequenceEstimator(CategoricalEstimator(), length=PoissonEstimator()),
    })


valid_record = st.fixed_dictionaries({
    "x": st.floats(-100, 100), "c": st.sampled_from(["a", "b"]), "n": st.integers(0, 20),
    "o": st.one_of(st.none(), st.floats(0.01, 100)),
    "s": st.lists(st.sampled_from(["p", "q"]), max_size=4),
})


@st.composite
def corrupted_records(draw):
    rows = draw(st.lists(valid_record, max_size=20))
    for _ in range(draw(st.integers(0, 3))):
        if not rows:
            rows.append(draw(st.one_of(weird, valid_record)))
            continue
        i = draw(st.integers(0, len(rows) - 1))
        kind = draw(st.sampled_from(["value", "drop", "extra", "row"]))
        row = dict(rows[i]) if isinstance(rows[i], dict) else {}
        if kind == "value":
            row[draw(st.sampled_from(sorted(row) or ["x"]))] = draw(weird)
        elif kind == "drop" and row:
            del row[draw(st.sampled_from(sorted(row)))]
        elif kind == "extra":
            row[draw(st.text(max_size=3))] = draw(weird)
        rows[i] = draw(weird) if kind == "row" else row
    return rows


@SIZES
def test_fuzz_record_rows(examples):
    @fuzz(corrupted_records(), examples)
    def run(rows):
        outcome(rows, record_estimator())
        outcome(rows, MixtureEstimator([record_estimator()] * 2, pseudo_count=1.0))

    run()


@SIZES
def test_fuzz_tuple_rows(examples):
    @fuzz(st.lists(st.one_of(st.tuples(st.floats(-50, 50), st.sampled_from(["u", "v"])),
                             st.lists(weird, max_size=3).map(tuple), weird), max_size=20),
          examples)
    def run(rows):
        outcome(rows, CompositeEstimator([GaussianEstimator(), CategoricalEstimator()]))

    run()


@SIZES
def test_fuzz_sequence_rows_for_a_hidden_markov_model(examples):
    @fuzz(st.lists(corrupted(st.floats(-20, 20), max_size=8).map(list), max_size=10), examples)
    def run(rows):
        outcome(rows, HiddenMarkovEstimator([GaussianEstimator(), GaussianEstimator()]))
        outcome(rows, SequenceEstimator(GaussianEstimator(), length=PoissonEstimator()))

    run()


@SIZES
def test_fuzz_row_weights(examples):
    @fuzz(st.tuples(st.integers(1, 25), st.lists(weird | st.floats(0, 10), max_size=30)),
          examples)
    def run(n_and_weights):
        n, weights = n_and_weights
        x = np.random.default_rng(n).normal(size=n)
        outcome(x, GaussianEstimator(), weights=weights)
        right_length = (weights + [1.0] * n)[:n]
        outcome(x, MixtureEstimator([GaussianEstimator()] * 2), weights=right_length)

    run()


# ---------------------------------------------------------------------------------------------
# Named cases (besides the fuzzing): each one's exact error


@pytest.mark.parametrize("data", [(), np.zeros((0, 2)), {}])  # [] and zeros(0): test_fit.py
def test_empty_data_of_every_shape(data):
    with pytest.raises(DataError, match="no rows"):
        mixfold.fit(data, GaussianEstimator(), progress=False)


def test_an_unseen_level_names_its_row():
    init = CategoricalDistribution({"a": 0.5, "b": 0.5})
    with pytest.raises(DataError, match=r"row 2: .*'c'") as err:
        mixfold.fit(["a", "b", "c", "a"], CategoricalEstimator(), init=init, progress=False)
    assert err.value.row == 2
    with pytest.raises(DataError, match="'z'"):
        init.log_density("z")


def test_a_bad_record_field_names_row_and_field():
    rows = [{"x": 1.0, "c": "a", "n": 1, "o": None, "s": []}] * 3
    rows = rows + [{"x": 1.0, "c": "a", "n": -2, "o": None, "s": []}]
    with pytest.raises(DataError) as err:
        mixfold.fit(rows, record_estimator(), progress=False)
    assert err.value.row == 3 and err.value.path == ("n",)
    assert str(err.value).startswith("row 3, field ['n']: expected an integer >= 0, got -2")


def test_a_bad_value_in_a_dataframe_names_row_and_column():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"x": [1.0, 2.0, float("nan"), 4.0], "c": ["a", "b", "a", "b"]})
    est = RecordEstimator({"x": GaussianEstimator(), "c": CategoricalEstimator()})
    with pytest.raises(DataError) as err:
        mixfold.fit(df, est, progress=False)
    assert err.value.row == 2 and err.value.path == ("x",)


def test_huge_values_give_a_clear_error_not_a_nan_model():
    with pytest.raises(NumericalError, match="invalid parameters"):
        mixfold.fit([1e200, -1e200, 3.0], GaussianEstimator(), progress=False)


@pytest.mark.parametrize("weights, message", [  # negative and all-zero: test_fit.py
    ([1.0, float("nan"), 1.0], "row 1: weights must be finite and >= 0"),
    ([1.0, float("inf"), 1.0], "row 1: weights must be finite and >= 0"),
    ([8e307, 1e308, 1.0], "the weights sum past the largest float64"),  # found by fuzzing
    ([1.0, 1.0], r"weights must have shape \(3,\)"),
    ([[1.0], 1.0, 1.0], "row 0: weights must be numbers, got \\[1.0\\]"),
    (["2.0", 1.0, 1.0], "row 0: weights must be numbers, got '2.0'"),
    ([1.0, None, 1.0], "row 1: weights must be numbers, got None"),
    ([True, False, True], "row 0: weights must be numbers, got True"),
])
def test_bad_weights(weights, message):
    with pytest.raises(DataError, match=message):
        mixfold.fit([1.0, 2.0, 3.0], GaussianEstimator(), weights=weights, progress=False)
