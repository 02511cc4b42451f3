"""Latest-image MERGE of a cdcsnap bronze table in Spark, compared with the source.

Usage: spark_merge.py BRONZE SOURCE_PARQUET SILVER [--expect-key-updates]
The order is DESIGN.md's (R11): per key, the last row by (_start_lsn, _command_id,
_seqval, _operation) with NULLs first wins; a delete (1) or an update-before (3)
removes the key. An update that keeps its key has its after image (4) last, so
that wins; an update of a key logged as 3 and 4 (trace flag 8207; .ci/spark runs
the demo with -key-updates) leaves its before image last under the old key, which
so goes. Step 1 MERGEs the snapshot rows (operation 0) into an empty silver
table, step 2 MERGEs the latest change per key with delete, update and insert
branches. Silver must equal the source exactly.
"""
import sys
import time

from delta import configure_spark_with_delta_pip
from delta.tables import DeltaTable
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

bronze_path, source_path, silver_path = sys.argv[1:4]
expect_key_updates = "--expect-key-updates" in sys.argv[4:]
KEY = ["region", "order_id"]
t0 = time.time()
builder = (
    SparkSession.builder.master("local[2]")
    .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
    .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.databricks.delta.snapshotPartitions", "2")
    .config("spark.sql.session.timeZone", "UTC")
    .config("spark.sql.warehouse.dir", ".cache/spark/warehouse")
)
spark = configure_spark_with_delta_pip(builder).getOrCreate()
spark.sparkContext.setLogLevel("ERROR")

bronze = spark.read.format("delta").load(bronze_path)
source = spark.read.parquet(source_path)
meta = [c for c in bronze.columns if c.startswith("_")]
data_cols = [c for c in bronze.columns if c not in meta]
assert sorted(data_cols) == sorted(source.columns), (data_cols, source.columns)

history = DeltaTable.forPath(spark, bronze_path).history().select("version", "userMetadata").collect()
assert any(r.userMetadata and '"snapshot"' in r.userMetadata for r in history), history

# Ascending with NULLs first, the last row wins: so rank descending, NULLs last.
LAST_FIRST = Window.partitionBy(*KEY).orderBy(
    F.col("_start_lsn").desc_nulls_last(), F.col("_command_id").desc_nulls_last(),
    F.col("_seqval").desc_nulls_last(), F.col("_operation").desc_nulls_last())


def latest(df):
    ranked = df.withColumn("_rank", F.row_number().over(LAST_FIRST))
    return ranked.filter("_rank = 1").drop("_rank")

snap = bronze.filter("_operation = 0")
changes = bronze.filter("_operation <> 0")
# Step 1: the snapshot into an empty silver table.
source.limit(0).write.format("delta").mode("overwrite").save(silver_path)
silver = DeltaTable.forPath(spark, silver_path)
cond = " AND ".join(f"t.{k} = s.{k}" for k in KEY)
assign = {c: f"s.{c}" for c in data_cols}
(silver.alias("t").merge(latest(snap).alias("s"), cond)
    .whenMatchedUpdate(set=assign).whenNotMatchedInsert(values=assign).execute())
# Step 2: the latest change per key, ordered after the snapshot rows.
(silver.alias("t").merge(latest(changes).alias("s"), cond)
    .whenMatchedDelete(condition="s._operation IN (1, 3)")
    .whenMatchedUpdate(set=assign)
    .whenNotMatchedInsert(condition="s._operation NOT IN (1, 3)", values=assign).execute())

# Key updates logged as 3 and 4: a before and an after image at one position
# whose keys differ.
before = changes.filter("_operation = 3").select(
    "_start_lsn", "_command_id", "_seqval", *[F.col(k).alias(k + "_old") for k in KEY])
after = changes.filter("_operation = 4").select("_start_lsn", "_command_id", "_seqval", *KEY)
moved = before.join(after, ["_start_lsn", "_command_id", "_seqval"]).filter(
    " OR ".join(f"NOT ({k}_old <=> {k})" for k in KEY)).count()

result = spark.read.format("delta").load(silver_path).select(*source.columns)
missing = source.exceptAll(result).count()
extra = result.exceptAll(source).count()
n_src, n_res = source.count(), result.count()
print(f"spark: bronze {bronze.count()} rows ({snap.count()} snapshot, {changes.count()} changes); "
      f"silver after MERGE {n_res} rows, source {n_src}; missing {missing}, extra {extra}; "
      f"{moved} key updates logged as 3 and 4; {time.time() - t0:.0f}s in Spark")
if expect_key_updates and not moved:
    sys.exit("spark: no key update logged as 3 and 4 in the bronze table (the demo ran without -key-updates?)")
if missing or extra or n_src != n_res:
    result.exceptAll(source).show(5, truncate=False)
    source.exceptAll(result).show(5, truncate=False)
    sys.exit("spark: the MERGE result differs from the source")
print("spark: latest-image MERGE equals the source table")
