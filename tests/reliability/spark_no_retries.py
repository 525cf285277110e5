"""Run as ``python spark_no_retries.py DIR``: a user's ``local[2]`` session (no task retries),
a Python worker SIGKILLed inside the E-step of the second shard; prints the error the fit
raises (one line) and the master, then stops Spark."""

import os
import sys
import zipfile
from pathlib import Path

from pyspark.sql import SparkSession

import mixfold
from mixfold.backends.spark import retries_failed_tasks, stop_spark_session
from tests.reliability.faults import FaultyEstimator, KillWorker, arm
from tests.reliability.test_faults import OPTIONS, gmm_est, gmm_rows

ROOT = Path(__file__).parents[2]


def main(directory: Path) -> None:
    session = (SparkSession.builder.master("local[2]").appName("user")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.ui.enabled", "false").getOrCreate())
    try:
        bundle = directory / "reliability_tests.zip"
        with zipfile.ZipFile(bundle, "w") as zf:
            for rel in ("tests/__init__.py", "tests/reliability/__init__.py",
                        "tests/reliability/faults.py"):
                zf.write(ROOT / rel, rel)
        session.sparkContext.addPyFile(str(bundle))
        print("retries:", retries_failed_tasks(session.sparkContext))
        arm(directory, "kill-0")
        fault = KillWorker(directory, 1500, os.getpid())
        try:
            mixfold.fit(gmm_rows(), FaultyEstimator(gmm_est(), fault), backend=session,
                        num_workers=2, **OPTIONS)
            print("error: none")
        except RuntimeError as err:
            print("error:", err)
    finally:
        stop_spark_session(session)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
