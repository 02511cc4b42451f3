"""Writes the Spark fixtures of testdata/delta (run by testdata/delta/make,
with the Python of .ci/sparkenv: pyspark 4.0.1 + delta-spark 4.0.0).

Usage: spark_tables.py OUT_DIR

Every table is written by Spark's own Delta writer; where a shape is a
crash or a later state of a real table (a _last_checkpoint never written,
or left behind at an older checkpoint), the script removes or restores that
one file afterwards and says so below. Rows are few and fixed, one data file
per write, so the tables stay kilobytes.
"""
import datetime
import decimal
import os
import shutil
import sys
import time

# Spark prints to stdout; keep it on stderr with everything else.
os.dup2(2, 1)
sys.stdout = sys.stderr
from delta import configure_spark_with_delta_pip
from pyspark.sql import SparkSession
from pyspark.sql import types as T

out = os.path.abspath(sys.argv[1])
warehouse = os.path.join(out, ".spark-warehouse")
builder = (
    SparkSession.builder.master("local[2]")
    .appName("cdcsnap-fixtures")
    .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
    .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.shuffle.partitions", "1")
    .config("spark.databricks.delta.snapshotPartitions", "1")
    .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "1")
    .config("spark.sql.session.timeZone", "UTC")
    .config("spark.sql.warehouse.dir", warehouse)
    .config("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
)
spark = configure_spark_with_delta_pip(builder).getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
jvm = spark._jvm

SCHEMA = T.StructType([
    T.StructField("id", T.LongType()),
    T.StructField("name", T.StringType()),
    T.StructField("amount", T.DecimalType(10, 2)),
    T.StructField("created", T.TimestampType()),
    T.StructField("region", T.StringType()),
])
BASE = datetime.datetime(2026, 11, 30, 12, 0, 0, tzinfo=datetime.timezone.utc)


def rows(first, n):
    return [(i, f"name {i}", decimal.Decimal(i) * decimal.Decimal("1.25"),
             BASE + datetime.timedelta(minutes=i), ("east", "west")[i % 2])
            for i in range(first, first + n)]


def path(name):
    return os.path.join(out, name)


def q(p):
    return "delta.`" + p.replace("`", "``") + "`"


def write(name, first, n, mode="append", partition_by=None, props=None):
    w = spark.createDataFrame(rows(first, n), SCHEMA).coalesce(1).write.format("delta").mode(mode)
    if partition_by:
        w = w.partitionBy(*partition_by)
    for k, v in (props or {}).items():
        w = w.option(k, v)
    w.save(path(name))


def create(name, props, partition_by=None, columns="id BIGINT, name STRING, amount DECIMAL(10,2), created TIMESTAMP, region STRING"):
    tbl = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    part = f" PARTITIONED BY ({', '.join(partition_by)})" if partition_by else ""
    spark.sql(f"CREATE TABLE {q(path(name))} ({columns}) USING delta{part} TBLPROPERTIES ({tbl})")


def delta_log(name):
    return jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path(name))


def log(name, *parts):
    return os.path.join(path(name), "_delta_log", *parts)


made = []


def table(fn):
    t0 = time.time()
    fn()
    made.append(fn.__name__)
    print(f"{fn.__name__}: {time.time() - t0:.1f} s", file=sys.stderr)
    return fn


@table
def spark_json_only():
    # Commits only, no checkpoint: adds, an overwrite's removes, a DELETE that
    # rewrites a file.
    write("spark_json_only", 0, 4, mode="overwrite")
    write("spark_json_only", 4, 3)
    write("spark_json_only", 10, 3, mode="overwrite")
    write("spark_json_only", 20, 3)
    spark.sql(f"DELETE FROM {q(path('spark_json_only'))} WHERE id = 21")


@table
def spark_checkpoint_then_commits():
    # Spark's own checkpoint at the interval (4), _last_checkpoint, and
    # commits after it.
    create("spark_checkpoint_then_commits", {"delta.checkpointInterval": "4"})
    for i in range(6):
        write("spark_checkpoint_then_commits", i * 2, 2, mode="overwrite" if i == 2 else "append")


@table
def spark_no_last_checkpoint():
    # A checkpoint whose _last_checkpoint was never written (a crash between
    # the two): the script deletes it.
    create("spark_no_last_checkpoint", {"delta.checkpointInterval": "2"})
    for i in range(3):
        write("spark_no_last_checkpoint", i * 2, 2)
    os.remove(log("spark_no_last_checkpoint", "_last_checkpoint"))


@table
def spark_stale_last_checkpoint():
    # _last_checkpoint names the checkpoint at 2, the newest is at 4 (its
    # update failed): the script puts the older one back.
    create("spark_stale_last_checkpoint", {"delta.checkpointInterval": "2"})
    write("spark_stale_last_checkpoint", 0, 2)
    write("spark_stale_last_checkpoint", 2, 2)
    with open(log("spark_stale_last_checkpoint", "_last_checkpoint"), "rb") as f:
        older = f.read()
    for i in range(2, 5):
        write("spark_stale_last_checkpoint", i * 2, 2, mode="overwrite" if i == 3 else "append")
    with open(log("spark_stale_last_checkpoint", "_last_checkpoint"), "wb") as f:
        f.write(older)


@table
def spark_log_cleaned():
    # Spark's own log cleanup and VACUUM: the commits before the checkpoint
    # at 4 and the files they removed are gone. Delta's cleanup deletes only
    # log files older than the day their retention ends in, so the script
    # dates the log two days back before the commit that checkpoints.
    create("spark_log_cleaned", {"delta.checkpointInterval": "2", "delta.logRetentionDuration": "interval 0 seconds",
                                 "delta.enableExpiredLogCleanup": "true"})
    write("spark_log_cleaned", 0, 2)
    write("spark_log_cleaned", 2, 2, mode="overwrite")
    write("spark_log_cleaned", 4, 2)
    d = log("spark_log_cleaned")
    for n in os.listdir(d):
        p = os.path.join(d, n)
        if os.path.isfile(p):
            st = os.stat(p)
            os.utime(p, (st.st_atime - 2 * 86400, st.st_mtime - 2 * 86400))
    write("spark_log_cleaned", 6, 2)
    write("spark_log_cleaned", 8, 2)
    spark.sql(f"VACUUM {q(path('spark_log_cleaned'))} RETAIN 0 HOURS").collect()


@table
def spark_checkpoint_without_stats():
    # A checkpoint without the stats column (neither JSON nor struct stats).
    create("spark_checkpoint_without_stats", {"delta.checkpointInterval": "2",
                                              "delta.checkpoint.writeStatsAsJson": "false",
                                              "delta.checkpoint.writeStatsAsStruct": "false"})
    write("spark_checkpoint_without_stats", 0, 2)
    write("spark_checkpoint_without_stats", 2, 2)


@table
def spark_partitioned_checkpoint():
    # A partitioned table with a checkpoint (partition values in it).
    create("spark_partitioned_checkpoint", {"delta.checkpointInterval": "2"}, partition_by=["region"])
    write("spark_partitioned_checkpoint", 0, 1, partition_by=["region"])
    write("spark_partitioned_checkpoint", 1, 1, partition_by=["region"])


@table
def spark_partition_types():
    # Partition values of every common type, NULLs and characters that
    # paths escape.
    name = "spark_partition_types"
    schema = T.StructType([
        T.StructField("id", T.LongType()),
        T.StructField("p_int", T.IntegerType()),
        T.StructField("p_str", T.StringType()),
        T.StructField("p_date", T.DateType()),
        T.StructField("p_ts", T.TimestampType()),
        T.StructField("p_dec", T.DecimalType(5, 2)),
        T.StructField("p_bool", T.BooleanType()),
    ])
    data = [
        (1, 1, "a b", datetime.date(2026, 1, 2), BASE, decimal.Decimal("1.50"), True),
        (2, -7, "x=y/z%", datetime.date(1999, 12, 31), BASE + datetime.timedelta(microseconds=1), decimal.Decimal("-0.01"), False),
        (3, None, None, None, None, None, None),
    ]
    (spark.createDataFrame(data, schema).write.format("delta")
     .partitionBy("p_int", "p_str", "p_date", "p_ts", "p_dec", "p_bool").save(path(name)))


@table
def spark_edge_timestamps():
    # The smallest and largest timestamps, as Spark writes them (INT96 by
    # default), and timestamp_ntz.
    name = "spark_edge_timestamps"
    schema = T.StructType([
        T.StructField("id", T.LongType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("ts_ntz", T.TimestampNTZType()),
    ])
    lo = datetime.datetime(1, 1, 1, tzinfo=datetime.timezone.utc)
    hi = datetime.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=datetime.timezone.utc)
    data = [(1, lo, lo.replace(tzinfo=None)), (2, hi, hi.replace(tzinfo=None)),
            (3, datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc), datetime.datetime(1970, 1, 1))]
    spark.createDataFrame(data, schema).coalesce(1).write.format("delta").save(path(name))


@table
def spark_deletion_vectors():
    # A DELETE that writes a deletion vector instead of rewriting the file.
    create("spark_deletion_vectors", {"delta.enableDeletionVectors": "true"})
    write("spark_deletion_vectors", 0, 10)
    spark.sql(f"DELETE FROM {q(path('spark_deletion_vectors'))} WHERE id % 3 = 0")


def column_mapping(name, mode):
    # Column mapping in mode, a column renamed after the first write.
    create(name, {"delta.columnMapping.mode": mode})
    write(name, 0, 3)
    spark.sql(f"ALTER TABLE {q(path(name))} RENAME COLUMN name TO label")
    spark.sql(f"INSERT INTO {q(path(name))} VALUES (3, 'name 3', 3.75, timestamp'2026-11-30 12:03:00', 'west')")


@table
def spark_column_mapping_name():
    # By name (reader version 2).
    column_mapping("spark_column_mapping_name", "name")


@table
def spark_column_mapping_id():
    # By id: Parquet field ids.
    column_mapping("spark_column_mapping_id", "id")


def v2(name, fmt):
    spark.conf.set("spark.databricks.delta.checkpointV2.topLevelFileFormat", fmt)
    try:
        create(name, {"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "2"})
        for i in range(4):
            write(name, i * 2, 2, mode="overwrite" if i == 2 else "append")
    finally:
        spark.conf.unset("spark.databricks.delta.checkpointV2.topLevelFileFormat")


@table
def spark_checkpoint_v2_parquet():
    # UUID-named v2 checkpoints, Parquet top-level file.
    v2("spark_checkpoint_v2_parquet", "parquet")


@table
def spark_checkpoint_v2_json():
    # UUID-named v2 checkpoints, JSON top-level file.
    v2("spark_checkpoint_v2_json", "json")


@table
def spark_checkpoint_multipart():
    # A checkpoint in several parts (at most 2 actions each).
    create("spark_checkpoint_multipart", {"delta.checkpointInterval": "100"})
    for i in range(4):
        write("spark_checkpoint_multipart", i * 2, 2)
    spark.conf.set("spark.databricks.delta.checkpoint.partSize", "2")
    try:
        delta_log("spark_checkpoint_multipart").checkpoint()
    finally:
        spark.conf.unset("spark.databricks.delta.checkpoint.partSize")
    write("spark_checkpoint_multipart", 8, 2)


spark.stop()
shutil.rmtree(warehouse, ignore_errors=True)
print("spark tables: " + " ".join(made), file=sys.stderr)
