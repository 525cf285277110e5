"""Models of every family, and their parameters as arrays (for bit-identity checks)."""

from typing import Any

import numpy as np

from mixfold import (
    BernoulliDistribution,
    BinomialDistribution,
    CategoricalDistribution,
    CompositeDistribution,
    DiagonalGaussianDistribution,
    ExponentialDistribution,
    GammaDistribution,
    GaussianDistribution,
    GeometricDistribution,
    HiddenMarkovDistribution,
    LogGaussianDistribution,
    MixtureDistribution,
    MultivariateGaussianDistribution,
    OptionalDistribution,
    PoissonDistribution,
    RecordDistribution,
    SequenceDistribution,
    VonMisesDistribution,
)


def leaf_models() -> list:
    return [
        BernoulliDistribution(0.3), BinomialDistribution(7, 0.4),
        CategoricalDistribution({"a": 0.25, ("t", 1): 0.5, 3: 0.25}),
        DiagonalGaussianDistribution([0.5, -1.0], [1.0, 2.5]),
        ExponentialDistribution(1.7), GammaDistribution(2.5, 0.8),
        GaussianDistribution(0.1 + 0.2, 1 / 3), GeometricDistribution(0.2),
        LogGaussianDistribution(0.4, 0.7),
        MultivariateGaussianDistribution([1.0, -2.0], [[1.0, 0.6], [0.6, 2.0]]),
        PoissonDistribution(3.3), VonMisesDistribution(0.7, 2.0),
    ]


def every_family_model() -> MixtureDistribution:
    """One nested model in which all 18 families occur."""
    record = RecordDistribution({
        "x": GaussianDistribution(1.0, 2.0),
        "plan": CategoricalDistribution({"free": 0.7, "pro": 0.3}),
        "visits": OptionalDistribution(PoissonDistribution(4.0), 0.1),
        "pages": SequenceDistribution(CategoricalDistribution({"home": 0.5, "docs": 0.5}),
                                      length=GeometricDistribution(0.3)),
        "pair": CompositeDistribution([BernoulliDistribution(0.6), BinomialDistribution(5, 0.2)]),
        "v": DiagonalGaussianDistribution([0.0, 1.0], [1.0, 0.5]),
        "w": MultivariateGaussianDistribution([0.0, 0.0], [[1.0, 0.2], [0.2, 1.0]]),
        "t": ExponentialDistribution(0.5), "g": GammaDistribution(2.0, 1.5),
        "angle": VonMisesDistribution(0.3, 4.0), "income": LogGaussianDistribution(10.0, 0.5),
        "walk": HiddenMarkovDistribution([GaussianDistribution(-1.0, 1.0),
                                          GaussianDistribution(1.0, 1.0)],
                                         [0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]]),
    })
    other = RecordDistribution({**record.fields, "x": GaussianDistribution(-1.0, 0.5)})
    return MixtureDistribution([record, other], [0.25, 0.75])


def parameter_arrays(model: Any) -> dict[str, np.ndarray]:
    """Every numeric parameter of ``model`` as an array, keyed by its path in ``to_dict()``."""
    out: dict[str, np.ndarray] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}/{k}")
        elif isinstance(node, list) and node and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in np.ravel(
                    np.array(node, dtype=object))):
            out[path] = np.asarray(node, dtype=np.float64)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            out[path] = np.asarray(node, dtype=np.float64)

    walk(model.to_dict() if hasattr(model, "to_dict") else model, "")
    return out


def assert_bit_identical(a: Any, b: Any) -> int:
    """Assert every parameter of ``a`` equals ``b``'s bit for bit; return how many compared."""
    pa, pb = parameter_arrays(a), parameter_arrays(b)
    assert pa.keys() == pb.keys()
    for key in pa:
        assert pa[key].shape == pb[key].shape, key
        assert np.array_equal(pa[key].view(np.uint64), pb[key].view(np.uint64)), key
    return len(pa)
