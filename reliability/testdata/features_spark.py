"""Bronze tables with Delta table features, made and read by Spark + Delta
(pyspark 4.0.1, delta-spark 4.0.0), for reliability/features_test.go.

Usage: features_spark.py WORKDIR
One Spark session serves the whole test: the script reads one JSON command
per line on stdin and answers each with one JSON line on stdout (Spark's own
output goes to stderr). An answer carries "error" when the command failed.

Commands:
  {"cmd": "create", "schema": <Delta schemaString as JSON>, "tables": [{"case", "path"}]}
      creates one empty table per case (see CASES below); answers per path
      what was asked, what Delta accepted ("accepted"/"refused" property ->
      error) and the protocol.
  {"cmd": "mutate", "path", "key": [...]}
      a deletion-vector case: DELETE the update-before rows (operation 3)
      and the snapshot rows (operation 0) of keys that have a later change
      (neither can win the latest image), then delta.appendOnly = true, then
      a checkpoint (v2, the table's policy). Answers the rows deleted, the
      deletion vectors in the log and the checkpoint files.
  {"cmd": "read", "tables": [{"path", "silver", "key": [...], "ntz": [...]}]}
      per table: row count, counts per operation, history (version,
      timestamp ms, operation), the latest-image MERGE into a new table at
      silver (timestamp_ntz columns cast back to timestamp in UTC), row ids
      (_metadata.row_id, row_commit_version) when row tracking is on, and
      for timestamp_ntz columns point and range counts with data skipping
      on and off (ntz_checks).
  {"cmd": "quit"}
"""
import json
import os
import sys
import time
import traceback

t0 = time.time()
answer = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr
from delta import configure_spark_with_delta_pip
from delta.tables import DeltaTable, IdentityGenerator
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType, TimestampNTZType

workdir = sys.argv[1]
warehouse = os.path.join(workdir, "spark-warehouse")
builder = (
    SparkSession.builder.master("local[2]")
    .appName("cdcsnap-features")
    .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
    .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.databricks.delta.snapshotPartitions", "2")
    .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "2")
    .config("spark.sql.session.timeZone", "UTC")
    .config("spark.sql.warehouse.dir", warehouse)
    .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
)
spark = configure_spark_with_delta_pip(builder).getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
session_seconds = round(time.time() - t0, 1)
jvm = spark._jvm


def q(path):
    return "delta.`" + path.replace("`", "``") + "`"


def snap(path):
    none = jvm.scala.Option.empty()
    dl = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    return dl.update(False, none, none)


def protocol(path):
    p = snap(path).protocol()
    rf = p.readerFeatures()
    wf = p.writerFeatures()
    feats = lambda o: sorted(str(x) for x in jvm.scala.jdk.javaapi.CollectionConverters.asJava(o.get())) if o.isDefined() else []
    return {"reader": p.minReaderVersion(), "writer": p.minWriterVersion(), "readerFeatures": feats(rf), "writerFeatures": feats(wf)}


def properties(path):
    conf = snap(path).metadata().configuration()
    return dict(jvm.scala.jdk.javaapi.CollectionConverters.asJava(conf))


def builder_of(schema, path, generated):
    """DeltaTable.create with schema's columns at path; generated maps a
    column to its generatedAlwaysAs (an expression or an IdentityGenerator)."""
    b = DeltaTable.create(spark).location(path)
    for f in schema.fields:
        b = b.addColumn(f.name, f.dataType, nullable=f.nullable, generatedAlwaysAs=generated.get(f.name))
    return b


def ddl_type(dt):
    return dt.simpleString()


def columns_ddl(schema, overrides):
    cols = []
    for f in schema.fields:
        if f.name in overrides:
            cols.append(f"`{f.name}` {overrides[f.name]}")
            continue
        cols.append(f"`{f.name}` {ddl_type(f.dataType)}" + ("" if f.nullable else " NOT NULL"))
    return ", ".join(cols)


# Databricks' defaults for new tables, as far as open-source Delta has
# them, plus the features a bronze table commonly gets; each is set on its
# own, so one Delta refuses does not hide the others. Not typeWidening: it
# is a reader feature too, and sink/delta does not read it (yet): see
# reliability/README.md, "Tables with features".
DATABRICKS_PROPS = [
    ("delta.enableDeletionVectors", "true"),
    ("delta.enableInCommitTimestamps", "true"),
    ("delta.enableRowTracking", "true"),
    ("delta.checkpointPolicy", "v2"),
    ("delta.enableChangeDataFeed", "true"),
    ("delta.feature.vacuumProtocolCheck", "supported"),
    ("delta.feature.domainMetadata", "supported"),
]


def create(cmd):
    schema = StructType.fromJson(cmd["schema"])
    out = {}
    for t in cmd["tables"]:
        case, path = t["case"], t["path"]
        r = {"case": case, "accepted": [], "refused": {}}
        out[path] = r
        start = time.time()
        try:
            if case == "databricks":
                # appendOnly comes after the DELETE (mutate): it forbids it.
                # All properties in CREATE TABLE; if Delta refuses that, each
                # on its own by ALTER TABLE, recording which it refuses.
                try:
                    b = builder_of(schema, path, {})
                    for k, v in DATABRICKS_PROPS:
                        b = b.property(k, v)
                    b.execute()
                    r["accepted"] = [f"{k}={v}" for k, v in DATABRICKS_PROPS]
                except Exception as e:
                    r["create_with_all"] = f"{type(e).__name__}: {str(e)[:500]}"
                    builder_of(schema, path, {}).execute()
                    for k, v in DATABRICKS_PROPS:
                        try:
                            spark.sql(f"ALTER TABLE {q(path)} SET TBLPROPERTIES ('{k}' = '{v}')")
                            r["accepted"].append(f"{k}={v}")
                        except Exception as e:
                            r["refused"][f"{k}={v}"] = f"{type(e).__name__}: {str(e)[:500]}"
            elif case == "deletionvectors":
                # Deletion vectors and v2 checkpoints without
                # vacuumProtocolCheck, which delta-rs 1.6.6 refuses.
                builder_of(schema, path, {}).property("delta.enableDeletionVectors", "true") \
                    .property("delta.checkpointPolicy", "v2").execute()
            elif case == "typewidening":
                builder_of(schema, path, {}).property("delta.enableTypeWidening", "true").execute()
            elif case == "ntz":
                ntz = [f.name for f in schema.fields if f.name in t.get("ntz", [])]
                s = StructType([f if f.name not in ntz else type(f)(f.name, TimestampNTZType(), f.nullable) for f in schema.fields])
                spark.createDataFrame([], s).write.format("delta").save(path)
                r["ntz"] = ntz
            elif case == "check":
                spark.createDataFrame([], schema).write.format("delta").save(path)
                spark.sql(f"ALTER TABLE {q(path)} ADD CONSTRAINT amount_not_negative CHECK (amount >= 0)")
            elif case == "generated":
                builder_of(schema, path, {"ship_date": "CAST(placed_at AS DATE)"}).execute()
            elif case == "identity":
                builder_of(schema, path, {"order_id": IdentityGenerator()}).execute()
            elif case in ("columnmapping", "columnmapping-id"):
                mode = "id" if case.endswith("-id") else "name"
                spark.sql(f"CREATE TABLE {q(path)} ({columns_ddl(schema, {})}) USING delta "
                          f"TBLPROPERTIES ('delta.columnMapping.mode' = '{mode}')")
            elif case == "partitioned":
                spark.sql(f"CREATE TABLE {q(path)} ({columns_ddl(schema, {})}) USING delta PARTITIONED BY (region)")
            elif case == "clustered":
                spark.sql(f"CREATE TABLE {q(path)} ({columns_ddl(schema, {})}) USING delta CLUSTER BY (region)")
            elif case == "variant":
                spark.createDataFrame([], schema).write.format("delta").save(path)
                spark.sql(f"ALTER TABLE {q(path)} SET TBLPROPERTIES ('delta.feature.variantType' = 'supported')")
            else:
                raise ValueError(f"unknown case {case}")
            r["protocol"] = protocol(path)
            r["properties"] = properties(path)
            r["version"] = snap(path).version()
        except Exception as e:
            r["error"] = f"{type(e).__name__}: {str(e)[:1500]}"
        r["seconds"] = round(time.time() - start, 1)
    return {"tables": out, "session_seconds": session_seconds}


def log_actions(path, kind):
    d = os.path.join(path, "_delta_log")
    out = []
    for name in sorted(os.listdir(d)):
        if name.endswith(".json") and name[:20].isdigit() and len(name) == 25:
            for line in open(os.path.join(d, name)):
                a = json.loads(line)
                if kind in a:
                    out.append(a[kind])
    return out


def mutate(cmd):
    path, key = cmd["path"], cmd["key"]
    start = time.time()
    before = spark.read.format("delta").load(path)
    n_before = before.count()
    keyexpr = F.concat_ws("\u0001", *[F.col(k).cast("string") for k in key])
    changed = [r[0] for r in before.filter("_operation IN (1, 2, 4)").select(keyexpr).distinct().collect()]
    dt = DeltaTable.forPath(spark, path)
    dt.delete("_operation = 3")
    v_delete1 = snap(path).version()
    dt.delete((F.col("_operation") == 0) & keyexpr.isin(changed))
    v_delete2 = snap(path).version()
    n_after = spark.read.format("delta").load(path).count()
    spark.sql(f"ALTER TABLE {q(path)} SET TBLPROPERTIES ('delta.appendOnly' = 'true')")
    jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path).checkpoint()
    adds = log_actions(path, "add")
    dvs = [a for a in adds if a.get("deletionVector")]
    logdir = os.path.join(path, "_delta_log")
    return {
        "rows_before": n_before, "rows_after": n_after, "keys_changed": len(changed),
        "delete_versions": [v_delete1, v_delete2], "version": snap(path).version(),
        "dv_adds": len(dvs), "dv_example": dvs[0]["deletionVector"] if dvs else None,
        "log": sorted(os.listdir(logdir)),
        "sidecars": sorted(os.listdir(os.path.join(logdir, "_sidecars"))) if os.path.isdir(os.path.join(logdir, "_sidecars")) else [],
        "protocol": protocol(path), "properties": properties(path),
        "seconds": round(time.time() - start, 1),
    }


LATEST_ORDER = ["_start_lsn", "_command_id", "_seqval", "_operation"]


def latest(df, key):
    w = Window.partitionBy(*key).orderBy(*[F.col(c).desc_nulls_last() for c in LATEST_ORDER])
    ranked = df.filter(F.col("_operation") != 3).withColumn("_rank", F.row_number().over(w))
    return ranked.filter("_rank = 1").drop("_rank")


def merge_silver(bronze, t):
    """The latest-image MERGE of .ci/spark_merge.py, into a new table."""
    key, silver_path = t["key"], t["silver"]
    data_cols = [c for c in bronze.columns if not c.startswith("_")]
    src = bronze
    for c in t.get("ntz", []):
        src = src.withColumn(c, F.col(c).cast("timestamp"))  # wall clock read as UTC
    schema = src.select(*data_cols).schema
    spark.createDataFrame([], schema).write.format("delta").save(silver_path)
    silver = DeltaTable.forPath(spark, silver_path)
    cond = " AND ".join(f"t.`{k}` = s.`{k}`" for k in key)
    assign = {f"`{c}`": f"s.`{c}`" for c in data_cols}
    (silver.alias("t").merge(latest(src.filter("_operation = 0"), key).alias("s"), cond)
        .whenMatchedUpdate(set=assign).whenNotMatchedInsert(values=assign).execute())
    (silver.alias("t").merge(latest(src.filter("_operation <> 0"), key).alias("s"), cond)
        .whenMatchedDelete(condition="s._operation = 1")
        .whenMatchedUpdate(set=assign)
        .whenNotMatchedInsert(condition="s._operation <> 1", values=assign).execute())
    return spark.read.format("delta").load(silver_path).count()


def ntz_checks(path, col):
    """Counts by a timestamp_ntz column (=, <=, > at its min, median and
    max) with data skipping off and on in UTC, and on in Los Angeles: file
    statistics that misstate the column, or a zone in them, would make the
    counts differ."""
    df = spark.read.format("delta").load(path)
    vals = [r[0] for r in df.select(col).where(F.col(col).isNotNull()).orderBy(col).collect()]
    if not vals:
        return {"values": 0}
    probes = sorted({vals[0], vals[len(vals) // 2], vals[-1]})
    res = {"values": len(vals), "min": str(vals[0]), "max": str(vals[-1]), "counts": {}}
    for tz, skippings in (("UTC", ("true", "false")), ("America/Los_Angeles", ("true",))):
        spark.conf.set("spark.sql.session.timeZone", tz)
        for skipping in skippings:
            spark.conf.set("spark.databricks.delta.stats.skipping", skipping)
            d = spark.read.format("delta").load(path)
            counts = []
            for p in probes:
                lit = F.lit(str(p)).cast("timestamp_ntz")  # a string: no zone anywhere
                # One query per comparison, so that each is pruned by the
                # file statistics on its own.
                counts.append([d.where(F.col(col) == lit).count(), d.where(F.col(col) <= lit).count(), d.where(F.col(col) > lit).count()])
            res["counts"][f"{tz} skipping={skipping}"] = counts
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.conf.unset("spark.databricks.delta.stats.skipping")
    res["probes"] = [str(p) for p in probes]
    return res


def read(cmd):
    out = {}
    for t in cmd["tables"]:
        path = t["path"]
        start = time.time()
        r = {}
        out[path] = r
        try:
            df = spark.read.format("delta").load(path)
            r["rows"] = df.count()
            r["by_operation"] = {str(row[0]): row[1] for row in df.groupBy("_operation").count().collect()}
            fp = df.agg(F.sum("order_id"), F.count("customer")).collect()[0]
            r["sum_order_id"], r["count_customer"] = fp[0], fp[1]
            r["protocol"] = protocol(path)
            r["version"] = snap(path).version()
            h = spark.sql(f"DESCRIBE HISTORY {q(path)}").select("version", "timestamp", "operation", "userMetadata").orderBy("version").collect()
            r["history"] = [{"version": x.version, "timestamp_ms": int(x.timestamp.timestamp() * 1000) if x.timestamp else None,
                             "operation": x.operation, "userMetadata": x.userMetadata} for x in h]
            if t.get("silver"):
                r["silver_rows"] = merge_silver(df, t)
            if properties(path).get("delta.enableRowTracking") == "true":
                ids = df.select(F.col("_metadata.row_id").alias("id"), F.col("_metadata.row_commit_version").alias("v"))
                agg = ids.agg(F.count("*"), F.countDistinct("id"), F.count("id"), F.count("v")).collect()[0]
                r["row_ids"] = {"rows": agg[0], "distinct": agg[1], "non_null": agg[2], "versions_non_null": agg[3],
                                "by_version": [[x[0], x[1], x[2], x[3]] for x in ids.groupBy("v").agg(
                                    F.count("*"), F.min("id"), F.max("id")).orderBy("v").collect()]}
            for c in t.get("ntz", []):
                r.setdefault("ntz", {})[c] = ntz_checks(path, c)
        except Exception as e:
            r["error"] = f"{type(e).__name__}: {str(e)[:3000]}"
        r["seconds"] = round(time.time() - start, 1)
    return {"tables": out}


for line in sys.stdin:
    if not line.strip():
        continue
    cmd = json.loads(line)
    if cmd["cmd"] == "quit":
        break
    try:
        res = {"create": create, "mutate": mutate, "read": read}[cmd["cmd"]](cmd)
    except Exception as e:
        res = {"error": f"{type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}"}
    res["seconds_total"] = round(time.time() - t0, 1)
    answer.write(json.dumps(res, default=str) + "\n")
    answer.flush()
spark.stop()
