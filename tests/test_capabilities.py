"""The capabilities each family declares, and what isinstance answers for a subclass that reads
its rows otherwise."""

from __future__ import annotations

import numpy as np
import pytest

import mixfold
from mixfold.capabilities import (
    CompensatedAccumulation,
    FusedFold,
    LinearInFeatures,
    RunsInBands,
    SeedsFromPoints,
    StackedScoring,
    StackedUpdate,
)
from mixfold.families import _protocol
from mixfold.families.composite import FactorAccumulator
from mixfold.families.gaussian import GaussianAccumulator
from mixfold.families.log_gaussian import LogGaussianAccumulator
from mixfold.families.poisson import PoissonAccumulator


def test_the_family_contract_reexports_every_capability():
    for cap in (StackedScoring, SeedsFromPoints, RunsInBands, StackedUpdate, FusedFold,
                LinearInFeatures, CompensatedAccumulation):
        assert getattr(_protocol, cap.__name__) is cap and cap.__name__ in _protocol.__all__


def test_families_declare_what_they_can_do():
    assert issubclass(mixfold.GaussianDistribution, StackedScoring)
    assert issubclass(mixfold.GaussianDistribution, RunsInBands)
    assert issubclass(mixfold.MixtureDistribution, RunsInBands)
    assert not issubclass(mixfold.PoissonDistribution, RunsInBands)
    assert issubclass(mixfold.GammaDistribution, SeedsFromPoints)
    assert not issubclass(mixfold.GammaDistribution, StackedScoring)
    assert issubclass(PoissonAccumulator, LinearInFeatures)
    assert issubclass(FactorAccumulator, FusedFold) and issubclass(FactorAccumulator, StackedUpdate)


def test_a_subclass_reading_rows_otherwise_keeps_only_what_it_redefines():
    # LogGaussian reads log x: it defines its own linear terms, but no double-double sums
    assert issubclass(GaussianAccumulator, CompensatedAccumulation)
    assert not issubclass(LogGaussianAccumulator, CompensatedAccumulation)
    assert not isinstance(LogGaussianAccumulator(), CompensatedAccumulation)
    assert issubclass(LogGaussianAccumulator, LinearInFeatures)

    class Shifted(GaussianAccumulator):
        def _add(self, x: np.ndarray, w: np.ndarray) -> None:
            super()._add(x + 1.0, w)

    assert not issubclass(Shifted, LinearInFeatures)


def test_a_declared_capability_without_its_method_cannot_be_made():
    class Half(StackedUpdate):
        pass

    with pytest.raises(TypeError, match="stack_update"):
        Half()
