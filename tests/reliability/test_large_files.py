"""What mixfold writes it reads back: models and checkpoints over the 64 MiB default limit."""

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

import mixfold
from mixfold import CategoricalDistribution, CategoricalEstimator, MixtureEstimator
from mixfold.checkpoint import CheckpointPath
from mixfold.cli import main
from mixfold.io.model_files import MAX_FILE_BYTES

pytestmark = pytest.mark.slow  # files of 70-90 MB, written and parsed


def _long_levels(n):
    return [f"{i:07d}-" + "x" * 400 for i in range(n)]


def test_a_model_over_64_mib_is_read_back_with_the_limit_raised(tmp_path):
    levels = _long_levels(200_000)
    p = np.random.default_rng(0).dirichlet(np.ones(len(levels)))
    model = CategoricalDistribution(p.tolist(), levels=levels)
    with pytest.warns(RuntimeWarning, match=r"load\(path, max_bytes=\d+\)"):
        path = mixfold.save(model, tmp_path / "big.json")
    size = os.path.getsize(path)
    assert size > MAX_FILE_BYTES
    with pytest.raises(mixfold.ModelFileError, match=r"over the size limit \(load\(\.\.\., "
                                                     r"max_bytes=\.\.\.\) raises it\)"):
        mixfold.load(path)
    assert mixfold.load(path, max_bytes=size) == model
    refused = CliRunner().invoke(main, ["sample", str(path), "-n", "3"])
    assert refused.exit_code == 1 and len(refused.stderr.strip().splitlines()) == 1
    assert "--max-model-bytes raises it" in refused.stderr
    drawn = CliRunner().invoke(main, ["sample", str(path), "-n", "3", "--seed", "2",
                                      "--max-model-bytes", str(size)])
    assert drawn.exit_code == 0, drawn.output
    assert [json.loads(line) for line in drawn.stdout.splitlines()] == \
        list(model.sampler(2).sample(3))


def test_a_checkpoint_over_64_mib_that_fit_wrote_is_resumed(tmp_path):
    levels = _long_levels(90_000)
    rows = np.array(levels + levels[:500], dtype=object)
    estimator = MixtureEstimator([CategoricalEstimator()] * 2)
    path = tmp_path / "fit.json"
    with pytest.warns(RuntimeWarning, match="CheckpointPath\\(path, max_bytes="):
        first = mixfold.fit(rows, estimator, max_iter=1, tol=0, progress=False,
                            checkpoint=path)
    assert os.path.getsize(path) > MAX_FILE_BYTES
    with pytest.raises(mixfold.CheckpointError, match="CheckpointPath"):
        mixfold.fit(rows, estimator, max_iter=2, tol=0, progress=False, checkpoint=path)
    big = CheckpointPath(path, max_bytes=1 << 30)
    resumed = mixfold.fit(rows, estimator, max_iter=2, tol=0, progress=False, checkpoint=big)
    whole = mixfold.fit(rows, estimator, max_iter=2, tol=0, progress=False)
    assert resumed.iterations == 2 and resumed.log_likelihood[:1] == first.log_likelihood[:1]
    assert resumed.log_likelihood == whole.log_likelihood and resumed.model == whole.model
