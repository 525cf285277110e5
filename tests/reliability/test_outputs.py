"""Every file the CLI writes: never over an input, never half-written, its folder checked first."""

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

import mixfold
from mixfold.cli import main
from mixfold.io.outputs import atomic_output, check_destination

from .cli_lines import one_error_line

SPEC = '{"mixture": {"record": {"x": "gaussian", "c": "categorical"}}, "k": 2}'


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 1, 60), rng.normal(8, 1, 60)])
    c = np.where(np.arange(120) < 60, "a", "b")
    path = tmp_path / "d.csv"
    path.write_text("x,c\n" + "".join(f"{v:.17g},{k}\n" for v, k in zip(x, c)))
    return path


@pytest.fixture
def model(data, tmp_path):
    out = tmp_path / "m.json"
    result = run("fit", data, "--model", SPEC, "--out", out, "--no-progress")
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.parametrize("command", ["predict", "score"])
def test_an_output_that_is_the_input_is_refused_and_the_input_kept(data, model, command):
    before = data.read_bytes()
    alias = data.parent / "." / data.name  # another spelling of the same file
    option = "--out" if command == "predict" else "--per-row"
    one_error_line(run(command, model, data, option, alias), option, "is the input",
                    "destroy")
    assert data.read_bytes() == before
    one_error_line(run(command, model, data, option, model), "is the input")
    assert mixfold.load(model) is not None


def test_an_output_hard_linked_to_the_input_is_refused(data, model, tmp_path):
    link = tmp_path / "link.csv"
    os.link(data, link)  # another name, the same device and inode
    before = data.read_bytes()
    one_error_line(run("predict", model, data, "--out", link), "is the input")
    assert data.read_bytes() == before


def test_fit_refuses_out_over_its_data_or_init_before_fitting(data, model, tmp_path):
    before = data.read_bytes()
    result = run("fit", data, "--model", SPEC, "--out", data, "--no-progress")
    one_error_line(result, "--out", "is the input")
    assert data.read_bytes() == before and "iteration" not in result.stdout
    old = model.read_bytes()
    result = run("fit", data, "--model", SPEC, "--init", model, "--out", model)
    one_error_line(result, "is the input")
    assert model.read_bytes() == old
    spec = tmp_path / "spec.json"
    spec.write_text(SPEC)
    one_error_line(run("fit", data, "--model", spec, "--out", spec), "is the input")
    assert spec.read_text() == SPEC


def test_a_file_of_an_input_folder_is_refused(tmp_path, model):
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "a.csv").write_text("x,c\n0.5,a\n")
    (folder / "b.csv").write_text("x,c\n8.5,b\n")
    one_error_line(run("predict", model, folder, "--out", folder / "b.csv"), "is the input")
    assert (folder / "b.csv").read_text() == "x,c\n8.5,b\n"


@pytest.mark.parametrize("command", ["predict", "score"])
def test_a_failure_on_a_later_block_leaves_the_old_output(tmp_path, model, command):
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "a.csv").write_text("x,c\n0.5,a\n8.5,b\n")
    (folder / "b.csv").write_text("x,c\n1.0,a\n2.0,never-seen\n")  # the second block fails
    out = tmp_path / "previous.txt"
    out.write_text("the previous output\n")
    option = "--out" if command == "predict" else "--per-row"
    one_error_line(run(command, model, folder, option, out), "never-seen", "row 3")
    assert out.read_text() == "the previous output\n"
    assert sorted(os.listdir(tmp_path)) == ["d.csv", "m.json", "parts", "previous.txt"]
    (folder / "b.csv").write_text("x,c\n1.0,a\n")
    assert run(command, model, folder, option, out).exit_code == 0
    assert len(out.read_text().splitlines()) == (4 if command == "predict" else 3)


@pytest.mark.parametrize("folder", ["/proc", "/sys"])
def test_an_unwritable_out_folder_is_refused_before_the_fit(data, folder):
    if not os.path.isdir(folder):
        pytest.skip(f"no {folder} here")
    result = run("fit", data, "--model", SPEC, "--out", f"{folder}/m.json", "--no-progress")
    one_error_line(result, "--out", "is not writable")
    assert "iteration" not in result.stdout


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root writes into a read-only folder")
def test_a_read_only_folder_is_refused_before_scoring(data, model, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        one_error_line(run("score", model, data, "--per-row", locked / "s.txt"),
                        "--per-row", "is not writable")
    finally:
        locked.chmod(0o755)


def test_outputs_to_stdout_and_to_a_fifo_are_streams(data, model, tmp_path):
    result = run("predict", model, data)
    assert result.exit_code == 0 and result.stdout.splitlines()[0] == "component"
    check_destination(os.devnull, [data])  # a device: streamed into, its folder not probed


def test_plots_are_written_whole_in_the_format_their_suffix_names(data, tmp_path):
    pytest.importorskip("matplotlib")
    plot = tmp_path / "bic.svg"
    result = run("select", data, "--model", SPEC, "--k", "1-2", "--plot", plot)
    assert result.exit_code == 0, result.output
    assert plot.read_text().lstrip().startswith("<?xml")
    one_error_line(run("select", data, "--model", SPEC, "--k", "1-2", "--plot", data),
                    "--plot", "is the input")


def test_atomic_output_keeps_the_old_file_on_failure(tmp_path):
    path = tmp_path / "out.json"
    path.write_text("old")
    with pytest.raises(ValueError):
        with atomic_output(path) as fh:
            fh.write(json.dumps({"half": 1}))
            raise ValueError("later block")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["out.json"]
