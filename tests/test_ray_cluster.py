"""A Ray cluster of two nodes (`ray.cluster_utils.Cluster` on this machine: a head and one
more node, one CPU each) reading its inputs from an S3 server and writing its run folder
there: the outputs are the local run's, both nodes did the work, and nothing was written to
local disk. It runs in a child process, so the cluster never meets
the session's local Ray instance."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import storage
from pipeline.runs import read_manifest
from pipeline.storage import Location
from tests.conftest import ROOT
from tests.test_storage import _ingest, _local_files, _pieces_config, _same, _staged

pytest.importorskip("ray", reason="Ray is the optional [ray] extra (in [dev])")

# The child: a two-node cluster, the pipeline run on it from the config given on stdin
CLUSTER_RUN = """
import json, sys
from ray.cluster_utils import Cluster
from pipeline.api import Pipeline

args = json.load(sys.stdin)
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": args.get("head_cpus", 1)})
worker = cluster.add_node(num_cpus=1)
cluster.wait_for_nodes()
if args.get("kill_after"):  # the second node killed once that many results have come back
    import pipeline.executors.ray as on_ray

    get, seen = on_ray._get, [0]

    def killing_get(ray, ref):
        seen[0] += 1
        if seen[0] == args["kill_after"]:
            cluster.remove_node(worker, allow_graceful=False)
        return get(ray, ref)

    on_ray._get = killing_get
attempts = 0
try:
    data = args["config"]
    data["run"].update(executor="ray", ray_address=cluster.address)
    p = Pipeline.from_config(data)
    p.config = p.config.with_base_dir(args["base"])
    while True:
        attempts += 1
        try:
            p.run(until=args["until"])
            break
        except Exception as e:  # a run the node's death failed: run again, as a user would
            if attempts == 2:
                raise
            print("attempt failed:", repr(e)[:300], file=sys.stderr)
finally:
    import ray
    ray.shutdown()
    cluster.shutdown()
print(json.dumps({"attempts": attempts}))
"""


def _on_cluster(bucket, tmp_path: Path, until: str = "filter", **args) -> tuple[Path, Location]:
    """The pieces inputs run locally from files, and on the two-node cluster from the S3
    server to a run folder there, up to stage `until` (`args`: more for the child, as
    kill_after): the two run folders. The child's folder (its base_dir) must stay empty."""
    folder, url, options = _staged(bucket, tmp_path)
    local = _ingest(_pieces_config(str(folder)), tmp_path / "local", until=until)
    (tmp_path / "cluster").mkdir()
    config = _pieces_config(url, options)
    runs = url.rsplit("/", 1)[0] + "/runs"
    config["run"]["root"] = runs
    config["filter"] = {"batch_size": 16}  # several spans: tasks at once, on both nodes
    child = {"config": config, "base": str(tmp_path / "cluster"), "until": until, **args}
    res = subprocess.run(
        [sys.executable, "-c", CLUSTER_RUN],
        input=json.dumps(child),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert _local_files(tmp_path / "cluster") == []
    return local, storage.location(f"{runs}/t", options)


def test_a_two_node_cluster_reads_objects_and_writes_the_local_runs_outputs(bucket, tmp_path):
    """Every stage, from ingest to export: the outputs are the local run's, tables equal, and
    each stage's rows of items were read and written by tasks on both nodes."""
    local, cluster = _on_cluster(bucket, tmp_path, until="export")
    _same(local, cluster)
    for stage in ("ingest", "filter", "dedup", "decontaminate", "shapes", "export"):
        m = read_manifest(cluster / stage)
        assert m is not None
        assert len(m["ray_nodes"]) == 2, m["ray_nodes"]  # tasks on both nodes
        assert m["workers_cpu_s"] > 0


def test_a_node_killed_mid_stage_and_the_run_resumes_to_the_same_outputs(bucket, tmp_path):
    """The second node dies after the first results of ingest: Ray runs its tasks again
    on the head (or the run fails and runs again); either way the outputs are the local
    run's, and no part the dead node left is taken for a finished one."""
    local, cluster = _on_cluster(bucket, tmp_path, kill_after=2)
    _same(local, cluster)


def test_a_head_node_with_no_cpus_for_tasks_runs_dedup_from_its_own_disk(bucket, tmp_path):
    """The driver on a head started with no CPUs for tasks (as large clusters are): dedup's
    working files are on its disk, and the tasks that move sets and band keys between them
    and the object store hold no CPU (executors.ray.here), so they run there; every other
    task runs on the other node. The outputs are the local run's."""
    local, cluster = _on_cluster(bucket, tmp_path, until="dedup", head_cpus=0)
    _same(local, cluster)
    m = read_manifest(cluster / "dedup")
    assert m is not None and len(m["ray_nodes"]) == 2, m["ray_nodes"]
