"""Run as ``python spark_gpus.py SCRIPT OUT``: a local Spark session whose driver discovers two
GPUs by ``SCRIPT`` (Spark's resource discovery); writes ``Resources.from_spark``'s devices and
what Spark reported as JSON to OUT. Its own process: a process holds one SparkContext."""

import json
import sys

from pyspark.sql import SparkSession

from mixfold.backends.spark import stop_spark_session
from mixfold.parallel.resources import Resources

script, out = sys.argv[1], sys.argv[2]
session = (SparkSession.builder.master("local[2]").appName("mixfold-gpus")
           .config("spark.driver.bindAddress", "127.0.0.1")
           .config("spark.driver.host", "127.0.0.1")
           .config("spark.ui.enabled", "false")
           .config("spark.driver.resource.gpu.amount", "2")
           .config("spark.driver.resource.gpu.discoveryScript", script)
           .getOrCreate())
try:
    sc = session.sparkContext
    devices = Resources.from_spark(sc).devices
    with open(out, "w") as fh:
        json.dump({"devices": [[d.name, d.kind] for d in devices],
                   "reported": list(sc.resources["gpu"].addresses),
                   "slots": sc.defaultParallelism}, fh)
finally:
    stop_spark_session(session)
