"""Manual check: Spark (pyspark 4.0.1 + delta-spark 4.0.0, from .ci/sparkenv)
reads a table cdcsnap wrote. Not run by go test (a Spark session takes ~50 s).

  .cache/spark-venv/bin/python sink/delta/interop/spark_read.py TABLE_DIR
"""
import sys
from pyspark.sql import SparkSession
from delta import configure_spark_with_delta_pip
b = (SparkSession.builder.master("local[2]")
     .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
     .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
     .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
     .config("spark.databricks.delta.snapshotPartitions", "2"))
spark = configure_spark_with_delta_pip(b).getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
p = sys.argv[1]
df = spark.read.format("delta").load(p)
df.printSchema()
print("COUNT", df.count())
df.where("id = 5 and _operation = 0").select("id", "name", "amount", "created", "day", "payload", "_start_lsn", "_snapshot", "_commit_ts").show(truncate=False)
print("NULLNAMES", df.where("name is null").count())
print("TSFILTER", df.where("created = timestamp'2026-11-30 12:39:56.789012' and _start_lsn = '0x0000002A00000F380003'").count())
spark.sql(f"DESCRIBE HISTORY delta.`{p}`").select("version", "operation", "userMetadata").show(truncate=False)
