"""Model files are untrusted input: crafted files are refused with ModelFileError, nothing runs."""

import json
import os
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mixfold
from mixfold import GaussianDistribution, ModelFileError
from mixfold.io.model_files import MAX_DEPTH, MAX_FILE_BYTES

from .models import assert_bit_identical, every_family_model, leaf_models


def doc_of(model_json):
    return {"format": "mixfold-model", "version": 1, "model": model_json}


def write(tmp_path, payload, name="crafted.json"):
    p = tmp_path / name
    if isinstance(payload, bytes):
        p.write_bytes(payload)
    elif isinstance(payload, str):
        p.write_text(payload)
    else:
        p.write_text(json.dumps(payload))
    return p


GAUSS = {"family": "Gaussian", "mu": 0.0, "sigma2": 1.0}


@pytest.mark.parametrize("model_json, message", [
    ({"family": "os.system", "command": "echo pwned"}, "unknown family 'os.system'"),
    ({"family": "__builtins__.eval", "source": "1"}, "unknown family"),
    ({**GAUSS, "__reduce__": ["os.system", ["echo pwned"]]}, "unknown field '__reduce__'"),
    ({**GAUSS, "py/object": "os.system"}, "unknown field 'py/object'"),
    ({"family": "Mixture", "weights": [1.0], "components": [{**GAUSS, "__class__": "x"}]},
     r"at model\['components'\]\[0\]: unknown field '__class__'"),
    ({"family": "Gaussian", "mu": "0", "sigma2": 1.0},
     r"model\['mu'\]: expected a number, got a string"),
    ({"family": "Gaussian", "mu": True, "sigma2": 1.0}, "expected a number, got a boolean"),
    ({"family": "Gaussian", "mu": [0.0], "sigma2": 1.0}, "invalid model description: TypeError"),
    ({"family": "Gaussian", "mu": 0.0, "sigma2": None}, "TypeError: .*NoneType"),
    ({"family": "Gaussian", "mu": 0.0}, "KeyError: 'sigma2'"),
    ({"family": "Gaussian", "mu": 0.0, "sigma2": -1.0}, "sigma2 must be finite and > 0"),
    ({"family": "Mixture", "weights": [0.5, 0.5], "components": [GAUSS]}, "one weight per"),
    ({"family": "Mixture", "weights": [0.7, 0.7], "components": [GAUSS, GAUSS]}, "sum to 1"),
    ({"family": "Mixture", "weights": [-0.5, 1.5], "components": [GAUSS, GAUSS]}, ">= 0"),
    ({"family": "Mixture", "weights": "ab", "components": "ab"}, "invalid model description"),
    ({"family": "Mixture", "weights": [1.0], "components": {"a": GAUSS}}, "invalid model"),
    ({"family": "Categorical", "levels": [[1, 2]], "probs": [1.0]}, "bad categorical level"),
    ({"family": "HiddenMarkov", "emissions": [GAUSS], "initial": [1.0],
      "transitions": [[0.5, 0.5]], "terminal": None}, "invalid model description"),
    ({"family": "Record", "fields": []}, "invalid model description"),
    (["family", "Gaussian"], "invalid model description"),
    ("Gaussian", "invalid model description"),
])
def test_crafted_model_descriptions_are_refused_naming_the_problem(tmp_path, model_json,
                                                                   message):
    with pytest.raises(ModelFileError, match=message):
        mixfold.load(write(tmp_path, doc_of(model_json)))


@pytest.mark.parametrize("text, message", [
    ('{"format": "mixfold-model", "version": 1, "model": {"family": "Gaussian", "mu": NaN, '
     '"sigma2": 1}}', "non-finite number NaN"),
    ('{"format": "mixfold-model", "version": 1, "model": {"family": "Mixture", "weights": '
     '[NaN, 1.0], "components": []}}', "non-finite number NaN"),
    ('{"format": "mixfold-model", "version": 1, "model": {"family": "Gaussian", "mu": 1e999, '
     '"sigma2": 1}}', "out of the float64 range"),
    ('{"format": "mixfold-model", "version": 1, "model": {"family": "Gaussian", "mu": -Infinity, '
     '"sigma2": 1}}', "non-finite number -Infinity"),
    ('{"format": "mixfold-model", "version": 1, "model": {"family": "Gaussian", "mu": '
     + "9" * 5000 + ', "sigma2": 1}}', "not valid JSON|invalid model"),
    ('{"format": "mixfold-model", "version": 1, "model": ' + GAUSS.__repr__() + '}',
     "not valid JSON"),
    ('{"format": "mixfold-model", "version": 1, "model": {}, "exec": "import os"}',
     "unknown top-level fields"),
    ('{"format": "pickle", "version": 1, "model": {}}', "not a mixfold model file"),
    ('{"format": "mixfold-model", "version": 2, "model": {}}', "unsupported version 2"),
    ("", "not valid JSON"),
    ("[]", "not a mixfold model file"),
])
def test_crafted_json_is_refused(tmp_path, text, message):
    with pytest.raises(ModelFileError, match=message):
        mixfold.load(write(tmp_path, text))


class _WritesAMarker:
    """Unpickling this would create a file: proof that loading never unpickles."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickle_bytes_are_refused_and_never_unpickled(tmp_path):
    marker = tmp_path / "unpickled"
    for payload in (pickle.dumps(_WritesAMarker(str(marker))),
                    pickle.dumps(GaussianDistribution(0.0, 1.0)),
                    pickle.dumps(doc_of(GAUSS), protocol=0)):
        with pytest.raises(ModelFileError, match="not a JSON text file|not valid JSON"):
            mixfold.load(write(tmp_path, payload, "model.pkl"))
    assert not marker.exists()


def test_deep_nesting_is_refused(tmp_path):
    deep = doc_of({"family": "Gaussian", "mu": 0.0, "sigma2": 1.0,
                   "x": json.loads("[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5))})
    with pytest.raises(ModelFileError, match=f"nested more than {MAX_DEPTH} levels deep"):
        mixfold.load(write(tmp_path, deep))
    # deeper than the parser itself can go: still a ModelFileError, not a RecursionError
    with pytest.raises(ModelFileError, match=f"nested more than {MAX_DEPTH} levels deep"):
        mixfold.load(write(tmp_path, "[" * 200_000 + "]" * 200_000))


def test_oversized_files_are_refused_before_parsing(tmp_path):
    p = tmp_path / "huge.json"
    with open(p, "wb") as fh:  # sparse: 64 MiB + 1 of zeros without writing them
        fh.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(ModelFileError, match=f"more than {MAX_FILE_BYTES} bytes"):
        mixfold.load(p)
    small = mixfold.save(every_family_model(), tmp_path / "m.json")
    with pytest.raises(ModelFileError, match="more than 100 bytes"):
        mixfold.load(small, max_bytes=100)
    assert mixfold.load(small, max_bytes=os.path.getsize(small)) == every_family_model()


def test_endless_devices_and_directories_are_refused(tmp_path):
    with pytest.raises(ModelFileError, match="more than 1000 bytes"):
        mixfold.load("/dev/zero", max_bytes=1000)  # a naive read() would never return
    with pytest.raises(ModelFileError, match="cannot be read"):
        mixfold.load(tmp_path)
    with pytest.raises(FileNotFoundError):  # Python's own error for a file that is not there
        mixfold.load(tmp_path / "missing.json")


def test_every_family_round_trips_bit_exactly(tmp_path):
    for i, model in enumerate([every_family_model(), *leaf_models()]):
        loaded = mixfold.load(mixfold.save(model, tmp_path / f"m{i}.json"))
        assert loaded == model
        assert_bit_identical(loaded, model)


# ---------------------------------------------------------------------------------------------
# Fuzzing: mutations of valid documents and arbitrary JSON end in a model or a ModelFileError

json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(-10**6, 10**6) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12)

VALID_DOCS = [doc_of(m.to_dict()) for m in [every_family_model(), *leaf_models()]]


def _places(node, path=()):
    """Every (path, value) inside a JSON document."""
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _places(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _places(v, path + (i,))


@st.composite
def mutated_documents(draw):
    doc = json.loads(json.dumps(draw(st.sampled_from(VALID_DOCS))))
    for _ in range(draw(st.integers(1, 3))):
        places = list(_places(doc))
        path, _ = draw(st.sampled_from(places))
        if not path:
            continue
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "delete", "insert"]))
        if action == "replace":
            parent[path[-1]] = draw(json_values)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = draw(json_values)
        else:
            parent.insert(path[-1], draw(json_values))
    return doc


def _load_or_refuse(tmp_path, payload):
    p = write(tmp_path, payload, "fuzz.json")
    try:
        model = mixfold.load(p)
    except ModelFileError:
        return "refused"
    # accepted: a valid model that writes and reads back to itself
    assert mixfold.load(mixfold.save(model, tmp_path / "again.json")) == model
    return "loaded"


FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(doc=mutated_documents())
def test_fuzz_mutated_documents(tmp_path, doc):
    _load_or_refuse(tmp_path, doc)


@FUZZ
@given(model=json_values)
def test_fuzz_arbitrary_model_json(tmp_path, model):
    assert _load_or_refuse(tmp_path, doc_of(model)) in ("refused", "loaded")


@settings(max_examples=50, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=200))
def test_fuzz_arbitrary_bytes(tmp_path, raw):
    with pytest.raises(ModelFileError):
        mixfold.load(write(tmp_path, raw, "bytes.json"))


# ---------------------------------------------------------------------------------------------
# Holes found by the second adversarial pass: each is a ModelFileError naming the place

OPTIONAL = {"family": "Optional", "inner": GAUSS, "p_missing": 0.25}


@pytest.mark.parametrize("model_json, message", [
    ({**OPTIONAL, "missing": {"none": True, "nan": True, "values": [], "exec": 1}},
     r"at model\['missing'\]: unknown field 'exec'"),
    ({**OPTIONAL, "missing": {"none": 1, "nan": True, "values": []}},
     r"at model\['missing'\]\['none'\]: expected a boolean, got a number"),
    ({**OPTIONAL, "missing": {"none": True, "nan": "yes", "values": []}},
     r"at model\['missing'\]\['nan'\]: expected a boolean, got a string"),
    ({**OPTIONAL, "missing": {"none": 1, "nan": True, "values": ["NA"]}},
     r"at model\['missing'\]\['none'\]: expected a boolean"),
    ({"family": "Categorical", "levels": ["a", "a"], "probs": [0.5, 0.5]},
     r"at model: invalid model description: .*levels must be distinct.*'a' twice"),
    ({"family": "Categorical", "levels": [1, True], "probs": [0.5, 0.5]},
     r"levels must be distinct.*\(1, True\) twice"),
    ({"family": "Categorical", "levels": [0, 0.0], "probs": [0.5, 0.5]},
     r"levels must be distinct.*\(0, 0\.0\) twice"),
    ({"family": "Mixture", "weights": [0.5, 0.5], "components": [
        GAUSS, {"family": "Categorical", "levels": ["a", "a"], "probs": [0.5, 0.5]}]},
     r"at model\['components'\]\[1\]: invalid model description: .*distinct"),
    ({"family": "Binomial", "n": 10**400, "p": 0.5}, r"at model: .*n must be an integer in"),
    ({"family": "Binomial", "n": 2**64, "p": 0.5}, r"n must be an integer in \[0, 2\*\*63 - 1\]"),
])
def test_schema_holes_are_refused_naming_the_place(tmp_path, model_json, message):
    with pytest.raises(ModelFileError, match=message):
        mixfold.load(write(tmp_path, doc_of(model_json)))


def test_the_default_missing_block_loads_and_matches_the_family_default(tmp_path):
    from mixfold.families.optional import MissingMarkers, OptionalDistribution

    assert OptionalDistribution.optional_params["missing"] == MissingMarkers().to_json()
    given = {**OPTIONAL, "missing": MissingMarkers().to_json()}
    assert mixfold.load(write(tmp_path, doc_of(given))) == \
        OptionalDistribution(GaussianDistribution(0.0, 1.0), 0.25)


def test_a_binomial_at_the_largest_count_samples(tmp_path):
    model = mixfold.load(write(tmp_path, doc_of({"family": "Binomial", "n": 2**63 - 1,
                                                 "p": 0.5})))
    assert model.sampler(0).sample(3).min() > 2**61


@pytest.mark.parametrize("version", [True, 1.0, "1"])
def test_a_version_that_only_equals_one_is_refused(tmp_path, version):
    with pytest.raises(ModelFileError, match="unsupported version"):
        mixfold.load(write(tmp_path, {"format": "mixfold-model", "version": version,
                                      "model": GAUSS}))


def test_a_fifo_is_neither_opened_blocking_nor_read_forever(tmp_path):
    import threading
    import time

    fifo = tmp_path / "model.json"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(ModelFileError, match="did not end within 0.3 s"):
        mixfold.load(fifo, timeout=0.3)  # no writer: open() used to block forever
    assert time.monotonic() - t0 < 2
    # a writer that sends a few bytes and keeps the pipe open
    opened = threading.Event()

    def trickle():
        with open(fifo, "w") as fh:
            fh.write('{"format": ')
            fh.flush()
            opened.wait(5)

    writer = threading.Thread(target=trickle)
    writer.start()
    try:
        with pytest.raises(ModelFileError, match="did not end within 0.3 s"):
            mixfold.load(fifo, timeout=0.3)
    finally:
        opened.set()
        writer.join(5)
    # a writer that sends a whole model and closes: read as a stream
    good = json.dumps(doc_of(GAUSS))
    writer = threading.Thread(target=lambda: fifo.write_text(good))
    writer.start()
    assert mixfold.load(fifo, timeout=5) == GaussianDistribution(0.0, 1.0)
    writer.join(5)


def test_a_socket_is_refused(tmp_path):
    import socket

    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "s"))
    try:
        with pytest.raises(ModelFileError, match="cannot be read"):
            mixfold.load(tmp_path / "s")
    finally:
        server.close()


MEASURE_LOAD = """
import resource, sys, time, mixfold
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
try:
    mixfold.load(sys.argv[1])
except mixfold.ModelFileError as err:
    print("refused", str(err)[-70:])
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(grown * 1024, time.perf_counter() - t0)
"""


@pytest.mark.parametrize("item, count", [("0", 8_000_000), ("0.5", 2_000_000),
                                         ("[]", 2_000_000), ('"ab"', 2_000_000)])
def test_loading_stays_within_ten_times_the_file_size(tmp_path, item, count):
    import subprocess
    import sys

    p = tmp_path / "big.json"
    p.write_text('{"format": "mixfold-model", "version": 1, "model": {"family": "Gaussian", '
                 '"mu": 0, "sigma2": 1, "x": [' + ",".join([item] * count) + "]}}")
    out = subprocess.run([sys.executable, "-c", MEASURE_LOAD, str(p)], capture_output=True,
                         text=True, timeout=60, check=True).stdout.split("\n")
    assert out[0].startswith("refused")  # by the size estimate, or by the shape ("unknown field")
    grown, seconds = map(float, out[-2].split())
    assert grown < 10 * p.stat().st_size, out
    assert seconds < 10
