"""The examples run on scikit-learn's bundled data and reach real outcomes."""

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("sklearn")


def test_iris_clusters_match_species_like_scikit_learn(capsys):
    from mixfold.examples import iris_clusters

    out = iris_clusters.run(seed=1)
    assert out["ari"] > 0.85
    assert out["ari"] == pytest.approx(out["sklearn_ari"])
    assert out["mean_log_likelihood"] == pytest.approx(out["sklearn_mean_log_likelihood"],
                                                       abs=1e-6)
    # setosa is one cluster on its own
    setosa = out["labels"][out["species"] == 0]
    assert len(set(setosa)) == 1 and (out["labels"] == setosa[0]).sum() == 50
    assert iris_clusters.main(["--seed", "1"]) == 0
    assert "adjusted Rand index vs species: 0.904" in capsys.readouterr().out


def test_iris_clusters_plot(tmp_path):
    pytest.importorskip("matplotlib")
    from mixfold.examples import iris_clusters

    png = tmp_path / "clusters.png"
    assert iris_clusters.main(["--plot", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_wine_records_mixed_families_beat_all_gaussian(capsys):
    from mixfold.examples import wine_records

    mixed = wine_records.run()
    assert mixed["ari"] > 0.85
    fams = mixed["families"]
    assert (fams["proline"], fams["magnesium"], fams["alcohol"]) == \
        ("LogGaussian", "Poisson", "Gaussian")
    assert list(fams)[:3] == ["alcohol", "malic_acid", "ash"]  # the data's column order
    assert wine_records.main([]) == 0
    printed = capsys.readouterr().out
    assert "all-Gaussian record: 0.741" in printed and "cultivar: 0.913" in printed


def test_digits_hmm_classifies_far_above_chance():
    from mixfold.examples import digits_hmm

    out = digits_hmm.run()
    assert out["accuracy"] > 0.85
    assert len(out["models"]) == 10
    assert all(m.num_states == 8 for m in out["models"])
    per_digit = [np.mean(out["predicted"][out["truth"] == d] == d) for d in range(10)]
    assert min(per_digit) > 0.6


def test_examples_run_as_modules():
    code = subprocess.run([sys.executable, "-m", "mixfold.examples.iris_clusters"],
                          capture_output=True, text=True, timeout=120)
    assert code.returncode == 0, code.stderr
    assert "3-component Gaussian mixture" in code.stdout


def test_a_family_written_outside_the_package_fits_like_scipy_and_composes(tmp_path):
    from mixfold.examples import custom_family

    out = custom_family.main()
    assert out["scale"] == pytest.approx(out["scipy_scale"], rel=1e-12)  # the closed-form MLE
    small, big = out["mixture_scales"]
    assert small == pytest.approx(1.0, rel=0.03) and big == pytest.approx(8.0, rel=0.03)
    model = custom_family.RayleighDistribution(2.5)
    import mixfold

    assert mixfold.load(mixfold.save(model, tmp_path / "r.json")) == model
    with pytest.raises(mixfold.DataError, match="row 1"):
        mixfold.optimize([1.0, -2.0], custom_family.RayleighEstimator(), progress=False)
