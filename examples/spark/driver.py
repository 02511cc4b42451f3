"""A whole cdcsnap snapshot with its partitions as Spark tasks.

The driver plans, Spark runs one task per partition, and the commit stays
the library's: one atomic Delta commit of every partition's files.

  1. `fanout plan -tasks tasks.jsonl > plan.json` (on the driver): finds the
     snapshot the table holds (then nothing is left to do), or resumes the
     partial one an earlier run recorded, or records a new plan; it writes
     one task line per partition left to read.
  2. The task lines become an RDD with one line per partition, piped
     through `fanout worker` on the executors (RDD.pipe): each task writes
     its partition's Parquet files into the table's folder, records its
     Part with the table, and prints the Part as one JSON line. A failed
     task is retried by Spark; files of a failed attempt are never
     committed (a retry finds the recorded Part, or writes new files).
  3. The driver collects the Part lines and runs `fanout commit`, which
     commits them, plus the recorded parts of partitions an earlier run
     finished, in one Delta commit (snapshot.CommitUsable).

Usage (local; see README.md beside this file for a cluster):

  go build -o /tmp/fanout ./examples/fanout
  python examples/spark/driver.py --fanout /tmp/fanout --target /tmp/bronze \
      --rows 1000000 --partitions 8

The source is the demo database (--rows, --seed), or the SQL Server whose
connection string is in CDCSNAP_SOURCE_DSN or in the file
CDCSNAP_SOURCE_DSN_FILE names: never on a command line.

Facts this relies on (PySpark 4.0.1, pyspark/core/rdd.py, RDD.pipe): the
command runs with env= as its whole environment (Popen(env=env); nothing
of the executor's is inherited), each element is written as one line to its
stdin, each stdout line is one output element, and a non-zero exit fails
the task only with checkCode=True. In local mode Spark does not retry a
failed task unless the master says so: local[N,F] allows F attempts
(SparkContext's LOCAL_N_FAILURES_REGEX; spark.task.maxFailures, default 4,
applies on clusters).
"""
import argparse
import json
import os
import subprocess
import sys
import time

# Environment variables the workers get (RDD.pipe gives them nothing
# else): the source's DSN or DSN file, object store credentials and
# endpoints, and what a Go program needs to find a temporary folder.
PASS_PREFIXES = ("CDCSNAP_", "AWS_", "AZURE_", "GOOGLE_", "STORAGE_EMULATOR_HOST")
PASS_NAMES = ("HOME", "TMPDIR", "PATH", "SSL_CERT_FILE", "SSL_CERT_DIR")


def worker_env():
    return {k: v for k, v in os.environ.items() if k.startswith(PASS_PREFIXES) or k in PASS_NAMES}


def source_flags(args):
    flags = ["-seed", str(args.seed), "-rows", str(args.rows)]
    if args.server_time_zone:
        flags += ["-server-time-zone", args.server_time_zone]
    return flags


def run(cmd, **kw):
    """Runs a step; its stderr goes to ours, a failure ends the driver."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"driver: {os.path.basename(cmd[0])} {cmd[1]} exited {p.returncode}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fanout", required=True, help="the fanout binary, at the same path on every executor")
    ap.add_argument("--target", required=True, help="the Delta table's URL, reachable from the driver and every executor")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--capture-instance", default="sales_orders")
    ap.add_argument("--rows", type=int, default=100_000, help="demo source: rows")
    ap.add_argument("--seed", type=int, default=42, help="demo source: seed")
    ap.add_argument("--server-time-zone", default="", help="SQL Server source: the server's IANA time zone")
    ap.add_argument("--work", default=".", help="folder for plan.json, tasks.jsonl, parts.jsonl")
    ap.add_argument("--master", default="local[2,2]",
                    help="Spark master (local[2,2]: 2 threads, 2 attempts per task); empty keeps the one spark-submit or the cluster set")
    ap.add_argument("--fail-partition", type=int, default=-1,
                    help="demo: this partition's first attempt crashes after writing and recording its files, so Spark retries it")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    plan_file = os.path.join(args.work, "plan.json")
    tasks_file = os.path.join(args.work, "tasks.jsonl")
    parts_file = os.path.join(args.work, "parts.jsonl")
    attempts_dir = os.path.join(args.work, "attempts")
    common = ["-target", args.target] + source_flags(args)
    t0 = time.time()

    plan = run([args.fanout, "plan", "-partitions", str(args.partitions), "-capture-instance", args.capture_instance,
                "-tasks", tasks_file] + common, env=worker_env())
    if not plan.strip():
        print(f"driver: {args.target} already holds a snapshot of {args.capture_instance}; nothing to do")
        return
    with open(plan_file, "w") as f:
        f.write(plan)
    with open(tasks_file) as f:
        tasks = [line for line in f.read().splitlines() if line]
    plan_id = json.loads(plan)["id"]
    print(f"driver: plan {plan_id}: {len(json.loads(plan)['ranges'])} partitions, {len(tasks)} to read "
          f"({time.time() - t0:.1f}s)", flush=True)

    from pyspark import TaskContext
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(f"cdcsnap snapshot {args.capture_instance}")
    if args.master:
        builder = builder.master(args.master)
    spark = (builder.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    t1 = time.time()
    parts = []
    if tasks:
        fail, adir = args.fail_partition, attempts_dir
        os.makedirs(adir, exist_ok=True)

        def tag(lines):
            # Runs in the same task as the pipe below: the attempt is the
            # pipe's. The demo's fault is injected here, on attempt 0 only.
            attempt = TaskContext.get().attemptNumber()
            for line in lines:
                task = json.loads(line)
                task["attempt"] = attempt
                if task["partition"] == fail and attempt == 0:
                    task["fault"] = "crash-after-write"
                open(os.path.join(adir, f"partition-{task['partition']}-attempt-{attempt}"), "w").close()
                yield json.dumps(task)

        rdd = sc.parallelize(tasks, len(tasks)).mapPartitions(tag)
        parts = rdd.pipe(f"{args.fanout} worker", env=worker_env(), checkCode=True).collect()
    t2 = time.time()
    print(f"driver: {len(parts)} parts from Spark ({t2 - t1:.1f}s for the tasks)", flush=True)
    if args.fail_partition >= 0 and tasks:
        tried = sorted(n for n in os.listdir(attempts_dir) if n.startswith(f"partition-{args.fail_partition}-"))
        print(f"driver: partition {args.fail_partition} ran as {', '.join(tried)}")
    with open(parts_file, "w") as f:
        f.write("".join(p + "\n" for p in parts))
    out = run([args.fanout, "commit", "-plan", plan_file, "-with-recorded"] + common + [parts_file], env=worker_env())
    print(f"driver: {out.strip()} ({time.time() - t2:.1f}s to commit; {time.time() - t0:.1f}s in all)")
    spark.stop()


if __name__ == "__main__":
    main()
