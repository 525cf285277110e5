import json

import numpy as np
import pytest

import mixfold
from mixfold import (
    CategoricalDistribution,
    GaussianDistribution,
    MixtureDistribution,
    ModelFileError,
    RecordDistribution,
)


def nested_model():
    rec = RecordDistribution({
        "x": GaussianDistribution(0.1 + 0.2, 1 / 3),
        "level": CategoricalDistribution([0.25, 0.5, 0.25], levels=[("a", 1), 2, "c"]),
    })
    return MixtureDistribution([rec, rec], [1 / 3, 2 / 3])


def test_save_load_is_exact(tmp_path):
    m = nested_model()
    path = mixfold.save(m, tmp_path / "m.json")
    loaded = mixfold.load(path)
    assert loaded == m
    assert loaded.components[0].fields["level"].levels == (("a", 1), 2, "c")
    assert loaded.weights[0] == m.weights[0]  # bit-exact floats


def test_file_is_plain_json(tmp_path):
    path = mixfold.save(nested_model(), tmp_path / "m.json")
    doc = json.loads(path.read_text())
    assert doc["format"] == "mixfold-model" and doc["model"]["family"] == "Mixture"


@pytest.mark.parametrize("text", [
    "not json",
    '{"format": "pickle", "version": 1, "model": {}}',
    '{"format": "mixfold-model", "version": 99, "model": {}}',
    '{"format": "mixfold-model", "version": 1, "model": {"family": "os.system", "cmd": "x"}}',
    '{"format": "mixfold-model", "version": 1, "model": {"family": "Gaussian", "mu": 0}}',
    '{"format": "mixfold-model", "version": 1, "model": {"family": "Gaussian", "mu": 0, '
    '"sigma2": -1}}',
    '{"format": "mixfold-model", "version": 1, "model": {"family": "Gaussian", "mu": NaN, '
    '"sigma2": 1}}',
])
def test_crafted_files_are_rejected(tmp_path, text):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(ModelFileError):
        mixfold.load(p)


def test_fitted_model_round_trips(tmp_path):
    x = np.random.default_rng(0).normal(size=100)
    m = mixfold.optimize(x, mixfold.GaussianEstimator(), progress=False)
    assert mixfold.load(mixfold.save(m, tmp_path / "g.json")) == m
