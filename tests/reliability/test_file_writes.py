"""Files the fit writes: a regular file is replaced atomically, special files are never replaced."""

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from click.testing import CliRunner

import mixfold
from mixfold import GaussianDistribution, GaussianEstimator, MixtureEstimator
from mixfold.cli import main
from mixfold.io.model_files import write_json_atomic

MODEL = GaussianDistribution(1.5, 0.25)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_a_new_file_gets_the_umask_and_an_old_one_keeps_its_permissions(tmp_path, umask_022):
    new = mixfold.save(MODEL, tmp_path / "new.json")
    assert stat.S_IMODE(os.stat(new).st_mode) == 0o644  # not mkstemp's 0600
    os.umask(0o077)
    assert stat.S_IMODE(os.stat(mixfold.save(MODEL, tmp_path / "private.json")).st_mode) == 0o600
    os.chmod(new, 0o640)
    mixfold.save(GaussianDistribution(2.0, 1.0), new)
    assert stat.S_IMODE(os.stat(new).st_mode) == 0o640 and mixfold.load(new).mu == 2.0
    assert sorted(os.listdir(tmp_path)) == ["new.json", "private.json"]


def test_a_symlink_is_followed_and_its_target_replaced(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "model.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    mixfold.save(MODEL, link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert mixfold.load(target) == MODEL and mixfold.load(link) == MODEL
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "real" / "later.json")
    mixfold.save(MODEL, dangling)
    assert dangling.is_symlink() and mixfold.load(tmp_path / "real" / "later.json") == MODEL
    assert sorted(os.listdir(tmp_path / "real")) == ["later.json", "model.json"]


def test_a_fifo_is_written_as_a_stream_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    deadline = time.monotonic() + 5
    while True:  # the reader's open() must be waiting before a non-blocking writer can open
        try:
            mixfold.save(MODEL, fifo)
            break
        except OSError as err:
            assert "no process is reading" in str(err) and time.monotonic() < deadline
            time.sleep(0.01)
    reader.join(5)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert json.loads(received[0])["model"] == MODEL.to_dict()


def test_a_fifo_without_a_reader_is_an_error_not_a_hang(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(OSError, match="no process is reading from this FIFO"):
        mixfold.save(MODEL, fifo)
    assert time.monotonic() - t0 < 2 and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_character_device_is_written_as_a_stream_not_replaced():
    primary, secondary = os.openpty()  # a terminal: a character device nobody minds writing to
    try:
        name = os.ttyname(secondary)
        before = os.stat(name)
        write_json_atomic(name, {"a": 1})
        after = os.stat(name)
        assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
        assert after.st_ino == before.st_ino
        got = b""
        while b"}" not in got:
            got += os.read(primary, 100)
        assert json.loads(got.replace(b"\r\n", b"\n")) == {"a": 1}
    finally:
        os.close(primary)
        os.close(secondary)


def test_sockets_and_directories_are_refused(tmp_path):
    sock_path = tmp_path / "s"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    try:
        with pytest.raises(OSError, match="cannot write a model to a socket"):
            mixfold.save(MODEL, sock_path)
        assert stat.S_ISSOCK(os.stat(sock_path).st_mode)
    finally:
        server.close()
    with pytest.raises(OSError, match="cannot write a model to a directory"):
        mixfold.save(MODEL, tmp_path)


HOLD_A_TEMPORARY = """
import sys, time
from pathlib import Path
from mixfold.io.outputs import locked_temporary
fd, tmp = locked_temporary(Path(sys.argv[1]))
print(tmp, flush=True)
time.sleep(60)
"""


def test_the_temporary_file_of_a_killed_writer_is_removed_by_the_next_write(tmp_path):
    target = tmp_path / "model.json"
    child = subprocess.Popen([sys.executable, "-c", HOLD_A_TEMPORARY, str(target)],
                             stdout=subprocess.PIPE, text=True)
    try:
        tmp = child.stdout.readline().strip()
        assert os.path.basename(tmp).startswith(".model.json.mixfold-")  # says whose it is
        mixfold.save(MODEL, target)
        assert os.path.exists(tmp)  # a live writer's file is left alone
    finally:
        child.kill()
        child.wait()
    mixfold.save(MODEL, target)
    assert sorted(os.listdir(tmp_path)) == ["model.json"]


def test_a_checkpoint_gets_the_same_treatment(tmp_path, umask_022):
    x = np.random.default_rng(0).normal(size=300)
    (tmp_path / "runs").mkdir()
    link = tmp_path / "fit.json"
    link.symlink_to(tmp_path / "runs" / "fit.json")
    mixfold.fit(x, MixtureEstimator([GaussianEstimator()] * 2), max_iter=3, progress=False,
                checkpoint=link)
    assert link.is_symlink()
    assert stat.S_IMODE(os.stat(tmp_path / "runs" / "fit.json").st_mode) == 0o644


def test_cli_out_dash_writes_the_model_to_stdout(tmp_path):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", np.concatenate([rng.normal(0, 1, 200), rng.normal(6, 1, 200)]))
    result = CliRunner().invoke(main, ["fit", str(tmp_path / "x.npy"), "--model",
                                       '{"mixture": "gaussian", "k": 2}', "--out", "-",
                                       "--no-progress"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # only the model is on stdout
    assert doc["format"] == "mixfold-model" and doc["model"]["family"] == "Mixture"
    assert "model written to standard output" in result.stderr
    assert "iteration" in result.stderr and not (tmp_path / "-").exists()


def test_cli_out_in_a_missing_folder_fails_before_the_fit(tmp_path):
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=50))
    result = CliRunner().invoke(main, ["fit", str(tmp_path / "x.npy"), "--model", '"gaussian"',
                                       "--out", str(tmp_path / "nope" / "m.json")])
    assert result.exit_code == 1 and "iteration" not in result.output
    assert "the folder" in result.stderr and "does not exist" in result.stderr
