"""Table maintenance with Spark + Delta (pyspark 4.0.1, delta-spark 4.0.0) on
cdcsnap bronze tables, every table in one Spark session.

Usage: maintain_spark.py JOB.json
JOB.json: {"tables": [{"path": "...", "op": "..."}, ...], "filler": "<capture instance>"}
Ops (each on its own table):
  txn-retention  delta.setTransactionRetentionDuration 1 s, logRetentionDuration
                 0 s, enableExpiredLogCleanup, checkpointInterval 3; wait past
                 the retention; appends up to the version before the second
                 multiple of 3 (Spark checkpoints at the first one, dropping
                 the expired txns); the log files' mtimes set two days back;
                 1 append, whose checkpoint runs Spark's own log cleanup. Delta's
                 cleanup only deletes log files older than the start of the day
                 their retention ends in (MetadataCleanup truncates the cutoff
                 to the day): backdating shows the table as it would be two
                 days later, and nothing else is forced. (5 appends, not
                 delta-rs's 25: each Spark append costs 2-4 s here.)
  checkpoint     2 appends; DeltaLog.checkpoint; 1 append (the checkpoint
                 stays the newest: Spark's own come at versions 10, 20...)
  multipart      the same with spark.databricks.delta.checkpoint.partSize=4
                 (a checkpoint of several parts)
  optimize       OPTIMIZE
  zorder         OPTIMIZE ... ZORDER BY (id, _start_lsn)
  vacuum         OPTIMIZE, then VACUUM ... RETAIN 0 HOURS
  compound       OPTIMIZE ZORDER BY, VACUUM as above, then txn-retention: the
                 rows are found in rewritten, mixed files with every txn gone
  v2checkpoint   delta.checkpointPolicy = 'v2'; 2 appends; DeltaLog.checkpoint
Appended rows belong to the filler capture instance (_operation 2, every
captured column NULL). Prints one JSON object: per path, what was done and
what the log looks like before and after.
"""
import json
import os
import sys
import time

t0 = time.time()
# Spark and Delta print to stdout (VACUUM: "Deleted N files..."), and the JVM
# inherits this process's stdout: keep the real one for the JSON answer and
# send everything else to stderr.
answer = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr
from delta import configure_spark_with_delta_pip
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

job = json.load(open(sys.argv[1]))
filler_ci = job["filler"]
warehouse = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "spark-warehouse")
builder = (
    SparkSession.builder.master("local[2]")
    .appName("cdcsnap-maintenance")
    .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
    .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    # VACUUM lists the table with this many tasks (default 10000: ~50 s here).
    .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "2")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.databricks.delta.snapshotPartitions", "2")
    .config("spark.sql.session.timeZone", "UTC")
    .config("spark.sql.warehouse.dir", warehouse)
    .config("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
)
spark = configure_spark_with_delta_pip(builder).getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
session = time.time() - t0
jvm = spark._jvm
out = {}


def log_files(path):
    return sorted(os.listdir(os.path.join(path, "_delta_log")))


def delta_log(path):
    return jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)


def snap(path):
    none = jvm.scala.Option.empty()
    return delta_log(path).update(False, none, none)


def protocol(path):
    return snap(path).protocol().toString()


def q(path):
    return "delta.`" + path.replace("`", "``") + "`"


def append(path, count, first_batch=1):
    schema = spark.read.format("delta").load(path).schema
    for i in range(count):
        cols = []
        for f in schema.fields:
            if f.name == "_capture_instance":
                v = F.lit(filler_ci)
            elif f.name == "_operation":
                v = F.lit(2)
            elif f.name == "_batch_id":
                v = F.lit(first_batch + i)
            else:
                v = F.lit(None)
            cols.append(v.cast(f.dataType).alias(f.name))
        spark.range(3).select(*cols).write.format("delta").mode("append").save(path)


def checkpoint(path):
    delta_log(path).checkpoint()


def backdate_log(path, seconds):
    d = os.path.join(path, "_delta_log")
    for name in os.listdir(d):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            st = os.stat(p)
            os.utime(p, (st.st_atime - seconds, st.st_mtime - seconds))


def begin(t):
    r = {"op": t["op"], "version_before": snap(t["path"]).version(), "log_before": log_files(t["path"]),
         "protocol_before": protocol(t["path"]), "session_seconds": round(session, 1)}
    out[t["path"]] = r
    return r


def finish(t):
    r = out[t["path"]]
    try:
        r.update(version=snap(t["path"]).version(), log_after=log_files(t["path"]), protocol=protocol(t["path"]),
                 rows=spark.read.format("delta").load(t["path"]).count())
    except Exception as e:  # reported; the Go test decides
        r.setdefault("error", f"reading after {t['op']}: {type(e).__name__}: {str(e)[:2000]}")
    r["seconds"] = round(time.time() - r.pop("_t"), 1)


retention = [t for t in job["tables"] if t["op"] in ("txn-retention", "compound")]
for t in retention:
    r = begin(t)
    r["_t"] = time.time()
    if t["op"] == "compound":
        r["metrics"] = str(spark.sql(f"OPTIMIZE {q(t['path'])} ZORDER BY (id, _start_lsn)").collect()[0])
        r["vacuumed"] = str(spark.sql(f"VACUUM {q(t['path'])} RETAIN 0 HOURS").collect())
    spark.sql(f"""ALTER TABLE {q(t['path'])} SET TBLPROPERTIES (
        'delta.setTransactionRetentionDuration' = 'interval 1 seconds',
        'delta.logRetentionDuration' = 'interval 0 seconds',
        'delta.enableExpiredLogCleanup' = 'true',
        'delta.checkpointInterval' = '3')""")
if retention:
    time.sleep(2.5)  # past the 1 s transaction retention
for t in retention:
    path = t["path"]
    try:
        v = snap(path).version()
        target = (v // 3 + 2) * 3  # the second checkpoint version after the ALTER
        n = target - 1 - v
        append(path, n)  # Spark checkpoints at (v // 3 + 1) * 3: the expired txns are dropped
        backdate_log(path, 2 * 86400)
        append(path, 1, n + 1)  # the checkpoint at target, then Spark's log cleanup
        r = out[path]
        r["appends"] = n + 1
    except Exception as e:
        out[path]["error"] = f"txn-retention: {type(e).__name__}: {str(e)[:2000]}"
    finish(t)

for t in job["tables"]:
    op, path = t["op"], t["path"]
    if op in ("txn-retention", "compound"):
        continue
    r = begin(t)
    r["_t"] = time.time()
    try:
        if op in ("checkpoint", "multipart"):
            append(path, 2)  # to version 8: the checkpoint below is the newest (Spark's own come at 10, 20...)
            if op == "multipart":
                spark.conf.set("spark.databricks.delta.checkpoint.partSize", "4")
            try:
                checkpoint(path)
            finally:
                spark.conf.unset("spark.databricks.delta.checkpoint.partSize")
            append(path, 1, 3)
        elif op == "optimize":
            r["metrics"] = str(spark.sql(f"OPTIMIZE {q(path)}").collect()[0])
        elif op == "zorder":
            r["metrics"] = str(spark.sql(f"OPTIMIZE {q(path)} ZORDER BY (id, _start_lsn)").collect()[0])
        elif op == "vacuum":
            r["metrics"] = str(spark.sql(f"OPTIMIZE {q(path)}").collect()[0])
            r["vacuumed"] = str(spark.sql(f"VACUUM {q(path)} RETAIN 0 HOURS").collect())
        elif op == "v2checkpoint":
            spark.sql(f"ALTER TABLE {q(path)} SET TBLPROPERTIES ('delta.checkpointPolicy' = 'v2')")
            append(path, 2)
            checkpoint(path)
        else:
            sys.exit(f"unknown op {op}")
    except Exception as e:
        r["error"] = f"{op}: {type(e).__name__}: {str(e)[:2000]}"
    finish(t)

total = round(time.time() - t0, 1)
for r in out.values():
    r["seconds_total"] = total
spark.stop()
answer.write(json.dumps(out) + "\n")
answer.flush()
