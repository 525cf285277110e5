"""Refusals the API words well are one CLI line too; inputs cannot make the CLI allocate
what a file merely declares; ``sample`` streams in bounded memory."""

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from click.testing import CliRunner

import mixfold
from mixfold.cli import MAX_SAMPLE_LENGTH, SAMPLE_BLOCK_ROWS, main
from mixfold.io.tables import read_data
from mixfold.precision.gpu import torch_device_available

from .cli_lines import one_error_line


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def x_npy(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.random.default_rng(0).normal(size=200))
    return path


def test_a_device_this_machine_lacks_is_one_line_before_reading_the_data(x_npy, tmp_path):
    if torch_device_available("cuda"):
        pytest.skip("this machine has CUDA")
    result = run("fit", x_npy, "--model", '"gaussian"', "--precision", "float32@cuda",
                 "--out", tmp_path / "m.json", "--no-progress")
    one_error_line(result, "float32@cuda", "'cuda'", "does not have", "float32@cpu")
    assert not (tmp_path / "m.json").exists()


def _npy_with_shape(path, shape_text, payload=b""):
    header = f"{{'descr': '<f8', 'fortran_order': False, 'shape': {shape_text}, }}".encode()
    header += b" " * (118 - len(header)) + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + payload)


def test_a_npy_header_is_checked_against_the_file_size_before_allocating(tmp_path):
    huge = tmp_path / "huge.npy"
    _npy_with_shape(huge, "(100000000000,)", np.arange(4.0).tobytes())
    with pytest.raises(ValueError, match=r"declares shape \(100000000000,\) of float64 "
                                         r"\(800000000000 bytes of values\), the file holds 32"):
        read_data(huge)
    one_error_line(run("fit", huge, "--model", '"gaussian"', "--out", tmp_path / "m.json"),
                    "huge.npy", "declares shape")
    short = tmp_path / "short.npy"
    _npy_with_shape(short, "(1000,)", np.arange(10.0).tobytes())  # fits, but is short
    with pytest.raises(ValueError, match="8000 bytes of values.*holds 80"):
        read_data(short)
    good = tmp_path / "good.npy"
    values = np.random.default_rng(1).normal(size=(7, 3))
    np.save(good, np.asfortranarray(values))
    assert np.array_equal(read_data(good), values)


def test_object_arrays_are_refused_without_unpickling(tmp_path):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="Python objects"):
        read_data(path)


@pytest.fixture
def model_file(tmp_path):
    model = mixfold.MixtureDistribution([mixfold.GaussianDistribution(-2.0, 1.0),
                                         mixfold.GaussianDistribution(3.0, 0.5)], [0.4, 0.6])
    return mixfold.save(model, tmp_path / "m.json"), model


def test_sample_prints_the_samplers_rows_block_by_block(model_file):
    path, model = model_file
    n = 2 * SAMPLE_BLOCK_ROWS + 5
    out = run("sample", path, "-n", n, "--seed", 4)
    assert out.exit_code == 0
    printed = np.array([json.loads(line) for line in out.stdout.splitlines()])
    sampler = model.sampler(4)  # the same sampler drawing the same blocks
    expected = np.concatenate([sampler.sample(SAMPLE_BLOCK_ROWS), sampler.sample(SAMPLE_BLOCK_ROWS),
                               sampler.sample(5)])
    assert np.array_equal(printed, expected)
    assert run("sample", path, "-n", 0).stdout == ""


def _peak_kib(path, n):
    code = ("import resource, sys\nfrom mixfold.cli import main\n"
            "try:\n    main(['sample', sys.argv[1], '-n', sys.argv[2]])\n"
            "except SystemExit:\n    pass\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code, str(path), str(n)], check=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
    return int(done.stderr.split()[-1])


def test_sample_memory_does_not_grow_with_n(model_file):
    path, _ = model_file
    small, large = _peak_kib(path, 1000), _peak_kib(path, 400_000)
    assert large - small < 20_000  # KiB; drawing every row first took ~100 MB more


def test_sample_refuses_a_sequence_length_it_cannot_hold_in_one_line(tmp_path):
    hmm = mixfold.HiddenMarkovDistribution([mixfold.GaussianDistribution(0.0, 1.0)], [1.0],
                                           [[1.0]])
    path = mixfold.save(hmm, tmp_path / "hmm.json")
    one_error_line(run("sample", path, "-n", 1, "--length", 10**11), "--length",
                    str(MAX_SAMPLE_LENGTH))
    drawn = run("sample", path, "-n", 3, "--length", 4000, "--seed", 1)  # 2 items a block
    assert drawn.exit_code == 0
    sampler = hmm.sampler(1, sample_length=4000)
    expected = [*sampler.sample(2), *sampler.sample(1)]
    assert [json.loads(line) for line in drawn.stdout.splitlines()] == \
        [np.asarray(row).tolist() for row in expected]


@pytest.mark.slow  # waits the model files' 10 s timeout
def test_a_stalled_fifo_model_is_one_line_after_the_timeout(tmp_path):
    fifo = tmp_path / "model.json"
    os.mkfifo(fifo)
    release = threading.Event()

    def stall():  # a few bytes, then the pipe held open
        with open(fifo, "w") as fh:
            fh.write('{"format": ')
            fh.flush()
            release.wait(60)

    writer = threading.Thread(target=stall)
    writer.start()
    try:
        result = run("sample", fifo, "-n", 1)
    finally:
        release.set()
        writer.join(10)
    # the writer lets go after 60 s: a reader waiting for it would see bad JSON, not this
    one_error_line(result, "did not end within 10 s")
