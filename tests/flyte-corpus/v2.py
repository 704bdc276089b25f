"""RayJobs as Flyte 2 builds them, reproduced field by field from flyte v2.0.43's source.

The Flyte 2 backend (module github.com/flyteorg/flyte/v2) is not served by the Go module
proxy ("403: This module version is not available"), so its code cannot be run here like
v1's; this script follows it instead. Each field names the function that sets it:

  actions/k8s/client.go              newTaskActionCR, applyRunSpecToTaskAction
                                     (the TaskAction's labels, env, annotations)
  executor/pkg/plugin/task_exec_metadata.go
                                     NewTaskExecutionMetadata (labels run/action/attempt/
                                     task-name, env RUN_NAME/ACTION_NAME/_U_RUN_BASE/
                                     _U_ORG_NAME, the task execution ID and generated name)
  executor/pkg/plugin/k8s/plugin_manager.go
                                     addObjectMetadata (RayJob name, labels, owner, finalizer)
  flyteplugins/go/tasks/pluginmachinery/flytek8s/k8s_resource_adds.go
                                     DecorateEnvVars, GetExecutionEnvVars, GetPodTolerations
  flyteplugins/go/tasks/plugins/k8s/ray/ray.go
                                     BuildResource, constructRayJob, buildHeadPodTemplate,
                                     buildWorkerPodTemplate, buildSubmitterPodTemplate
  flyteplugins/go/tasks/plugins/k8s/ray/config.go
                                     defaultConfig (NodePort, dashboard, TTL 3600, ...)

Go map order is random per process: the orders of `DecorateEnvVars`' maps (the task
execution env and the platform's DefaultEnvVars) and of `GetPodTolerations`' resource
names are drawn from a seeded RNG per scenario, and a "shuffled" scenario is guaranteed
an order different from its twin's.

    python3 tests/flyte-corpus/v2.py tests/fixtures/flyte/v2
"""

import copy
import json
import random
import sys
from pathlib import Path

PROJECT, DOMAIN, NAMESPACE = "flytesnacks", "development", "flytesnacks-development"
TASK_NAME = "ray_example.ray_task"
FILES = [
    "flyte v2.0.43 (reproduced, tests/flyte-corpus/v2.py): actions/k8s/client.go",
    "executor/pkg/plugin/task_exec_metadata.go NewTaskExecutionMetadata",
    "executor/pkg/plugin/k8s/plugin_manager.go addObjectMetadata",
    "flyteplugins/go/tasks/pluginmachinery/flytek8s/k8s_resource_adds.go",
    "flyteplugins/go/tasks/plugins/k8s/ray/ray.go, config.go",
]

# The platform's K8s plugin config (same as the v1 corpus): sandbox default env vars
# (charts/flyte-core/values-sandbox.yaml), per-resource and default tolerations.
DEFAULT_ENV_VARS = {
    "FLYTE_AWS_ENDPOINT": "http://minio.flyte.svc.cluster.local:9000",
    "FLYTE_AWS_ACCESS_KEY_ID": "minio",
    "FLYTE_AWS_SECRET_ACCESS_KEY": "miniostorage",
}
RESOURCE_TOLERATIONS = {
    "cpu": [{"key": "pool", "operator": "Equal", "value": "cpu", "effect": "NoSchedule"}],
    "memory": [{"key": "pool", "operator": "Equal", "value": "highmem", "effect": "NoSchedule"}],
}
DEFAULT_TOLERATIONS = [{"key": "flyte", "operator": "Exists", "effect": "NoSchedule"}]

PIP_YAML = "pip:\n- numpy==2.1.0\nenv_vars:\n  FEATURE_FLAG: 'on'\n"
# flyteplugins ray.go convertBase64RuntimeEnvToYaml (gopkg.in/yaml.v2 Marshal of the
# decoded JSON); the same text the v1 corpus gets from running it.
LEGACY_YAML = 'config:\n  setup_timeout_seconds: 600\nenv_vars:\n  FEATURE_FLAG: "on"\n  RETRIES: "3"\npip:\n- numpy==2.1.0\n'
AMBIGUOUS_YAML = (
    "config:\n  eager_install: true\n  setup_timeout_seconds: 600\nenv_vars:\n  A: 'on'\n"
    "  B: 'yes'\n  C: n\n  D: 'off'\n  E: '~'\n  F: '1_000'\n  G: '0x1F'\n  H: '3'\npip:\n- numpy==2.1.0\n"
)


def scenarios():
    base = dict(run="r9x2k4m7p1q8", action="a7c3e9f1", attempts=1, version="v1",
                image="ghcr.io/acme/ray-task:py3.12-abc123", replicas=2, second_group=False,
                autoscaling=False, runtime_env_yaml=PIP_YAML, seed=1)

    def case(name, **changes):
        s = dict(base, name=name, **changes)
        return s

    return [
        case("run1-attempt1"),
        case("run1-attempt2", attempts=2, seed=2),
        case("run2-attempt1", run="k3m8p2x7q9z4", seed=3),
        case("run3-shuffled", run="m5n1b8v3c6x2", shuffled_from="run1-attempt1"),
        case("new-task-version", run="p4q8r2s6t1u5", version="v2", seed=5),
        case("new-image", run="q5r9s3t7u2v6", image="ghcr.io/acme/ray-task:py3.12-def456", seed=6),
        case("more-replicas", run="s6t1u4v8w3x7", replicas=4, seed=7),
        case("second-worker-group", run="t7u2v5w9x4y8", second_group=True, seed=8),
        case("autoscaling", run="u8v3w6x1y5z9", autoscaling=True, seed=9),
        case("runtime-env-empty", run="v9w4x7y2z6a1", runtime_env_yaml="", seed=10),
        case("runtime-env-legacy-base64", run="w1x5y8z3a7b2", runtime_env_yaml=LEGACY_YAML,
             legacy_base64=True, seed=11),
        case("runtime-env-ambiguous-scalars", run="x2y6z9a4b8c3", runtime_env_yaml=AMBIGUOUS_YAML,
             seed=12),
        # A run and an action named so that YAML 1.1 would read a boolean.
        case("run-named-on", run="on", action="no", seed=13),
    ]


def go_map_order(mapping, rng):
    """Items of a Go map in one random iteration order."""
    items = list(mapping.items())
    rng.shuffle(items)
    return items


def env(name, value):
    return {"name": name, "value": value}


def field_env(name, path):
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def build(s, rng):
    retry = max(s["attempts"], 1) - 1  # task_exec_metadata.go attemptToRetry
    ta_name = f"{s['run']}-{s['action']}"  # client.go buildTaskActionName (child action)
    run_base = f"s3://flyte-data/{PROJECT}/{DOMAIN}/{s['run']}"
    # client.go newTaskActionCR; applyRunSpecToTaskAction adds no run-spec labels here.
    ta_labels = {
        "flyte.org/project": PROJECT, "flyte.org/domain": DOMAIN, "flyte.org/run": s["run"],
        "flyte.org/action": s["action"], "flyte.org/action-type": "task",
        "flyte.org/is-root": "false",
    }
    # task_exec_metadata.go NewTaskExecutionMetadata: injectLabels, then run/action/
    # attempt (1-based)/task-name (SanitizeLabelValue: lower case, '.' and '_' -> '-').
    labels = dict(ta_labels)
    labels.update({"organization": "flyte", "project": PROJECT, "domain": DOMAIN,
                   "flyte.org/managed": "true", "run": s["run"], "action": s["action"],
                   "attempt": str(retry + 1), "task-name": TASK_NAME.replace(".", "-").replace("_", "-")})
    task_env = {"ACTION_NAME": s["action"], "RUN_NAME": s["run"], "_U_RUN_BASE": run_base,
                "_U_ORG_NAME": "local"}

    # k8s_resource_adds.go DecorateEnvVars on the SDK container's env (no workflow ID on
    # the executor's context, no console URL: GetConsoleURL returns "").
    container_env = [env("LOG_LEVEL", "20")]
    container_env += [
        env("FLYTE_INTERNAL_EXECUTION_ID", s["run"]),
        env("FLYTE_INTERNAL_EXECUTION_PROJECT", PROJECT),
        env("FLYTE_INTERNAL_EXECUTION_DOMAIN", DOMAIN),
        field_env("_F_PN", "metadata.name"),
        env("FLYTE_ATTEMPT_NUMBER", str(retry)),
    ]
    task_id = {"PROJECT": PROJECT, "DOMAIN": DOMAIN, "NAME": TASK_NAME, "VERSION": s["version"]}
    container_env += [env(f"FLYTE_INTERNAL_TASK_{k}", v) for k, v in task_id.items()]
    container_env += [env(f"FLYTE_INTERNAL_{k}", v) for k, v in task_id.items()]
    container_env += [env(k, v) for k, v in go_map_order(task_env, rng)]
    container_env += [env(k, v) for k, v in go_map_order(DEFAULT_ENV_VARS, rng)]

    # GetPodTolerations: per resource name (a Go set's UnsortedList), then defaults.
    tolerations = []
    for name, _ in go_map_order({"cpu": 1, "memory": 1}, rng):
        tolerations += copy.deepcopy(RESOURCE_TOLERATIONS[name])
    tolerations += copy.deepcopy(DEFAULT_TOLERATIONS)

    resources = {"limits": {"cpu": "1", "memory": "2Gi"}, "requests": {"cpu": "1", "memory": "2Gi"}}
    args = ["a0", "--inputs", f"{run_base}/{s['action']}/inputs.pb", "--outputs-path",
            f"{run_base}/{s['action']}/{s['attempts']}", "--version", s["version"],
            "--run-name", s["run"], "--name", s["action"], "--resolver",
            "flyte._internal.resolvers.default.DefaultTaskResolver", "mod", "ray_example",
            "instance", "ray_task"]
    task_container = {"name": ta_name, "image": s["image"], "args": args,
                      "resources": resources, "env": container_env,
                      "terminationMessagePolicy": "FallbackToLogsOnError"}
    pod_spec = {"containers": [task_container], "restartPolicy": "Never",
                "tolerations": tolerations, "serviceAccountName": "default"}

    def pod_labels():
        # UnionMaps(DefaultLabels, template labels, task labels, k8s_pod labels, managed).
        return dict(labels)

    # buildHeadPodTemplate
    head = copy.deepcopy(pod_spec)
    hc = head["containers"][0]
    hc["name"] = "ray-head"
    hc["env"] = hc["env"] + [field_env("MY_POD_IP", "status.podIP"),
                             env("RAY_COLOR_PREFIX", "0"), env("RAY_DATA_DISABLE_PROGRESS_BARS", "1")]
    hc["args"] = []
    hc["ports"] = [{"name": "redis", "containerPort": 6379}, {"name": "head", "containerPort": 10001},
                   {"name": "dashboard", "containerPort": 8265}]
    head_template = {"metadata": {"labels": pod_labels()}, "spec": head}

    def worker(group, replicas, min_r, max_r):
        # buildWorkerPodTemplate
        spec = copy.deepcopy(pod_spec)
        wc = spec["containers"][0]
        wc["name"] = "ray-worker"
        wc["args"] = []

        def res(name, r):
            return {"name": name, "valueFrom": {"resourceFieldRef": {"containerName": "ray-worker", "resource": r}}}

        wc["env"] = wc["env"] + [
            env("RAY_DISABLE_DOCKER_CPU_WARNING", "1"), env("TYPE", "worker"),
            res("CPU_REQUEST", "requests.cpu"), res("CPU_LIMITS", "limits.cpu"),
            res("MEMORY_REQUESTS", "requests.cpu"), res("MEMORY_LIMITS", "limits.cpu"),
            field_env("MY_POD_NAME", "metadata.name"), field_env("MY_POD_IP", "status.podIP"),
            env("RAY_COLOR_PREFIX", "0"), env("RAY_DATA_DISABLE_PROGRESS_BARS", "1"),
        ]
        wc["lifecycle"] = {"preStop": {"exec": {"command": ["/bin/sh", "-c", "ray stop"]}}}
        wc["ports"] = [{"name": "redis", "containerPort": 6379}, {"name": "head", "containerPort": 10001},
                       {"name": "dashboard", "containerPort": 8265}]
        # constructRayJob: minReplicas <= replicas <= maxReplicas.
        return {"groupName": group, "replicas": replicas, "minReplicas": min(min_r, replicas),
                "maxReplicas": max(max_r, replicas),
                "rayStartParams": {"disable-usage-stats": "true", "node-ip-address": "$MY_POD_IP"},
                "template": {"metadata": {"labels": pod_labels()}, "spec": spec}}

    n = s["replicas"]
    groups = [worker("cpu", n, 1 if s["autoscaling"] else n, 8 if s["autoscaling"] else n)]
    if s["second_group"]:
        groups.append(worker("highmem", 1, 1, 1))

    cluster = {
        "headGroupSpec": {
            "serviceType": "NodePort", "enableIngress": True,
            "rayStartParams": {"dashboard-host": "0.0.0.0", "disable-usage-stats": "true",
                               "include-dashboard": "true", "node-ip-address": "$MY_POD_IP",
                               "num-cpus": "0"},
            "template": head_template,
        },
        "workerGroupSpecs": groups,
        "enableInTreeAutoscaling": s["autoscaling"],
    }
    # buildSubmitterPodTemplate (K8sJobMode)
    submitter = {
        "metadata": {"labels": dict(labels)},
        "spec": {"containers": [{"name": "ray-job-submitter", "image": s["image"],
                                 "resources": {"limits": {"cpu": "1", "memory": "1Gi"},
                                               "requests": {"cpu": "500m", "memory": "200Mi"}}}],
                 "restartPolicy": "Never", "enableServiceLinks": False,
                 "tolerations": copy.deepcopy(DEFAULT_TOLERATIONS)},
    }
    spec = {"rayClusterSpec": cluster, "entrypoint": " ".join(args),
            "shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 3600,
            "submissionMode": "K8sJobMode", "submitterPodTemplate": submitter}
    if s["runtime_env_yaml"]:
        spec["runtimeEnvYAML"] = s["runtime_env_yaml"]
    # plugin_manager.go addObjectMetadata: name <TaskAction>-<retry> (<= 47 characters),
    # labels, controller owner TaskAction, the flyte/flytek8s finalizer.
    metadata = {
        "name": f"{ta_name}-{retry}", "namespace": NAMESPACE, "labels": dict(labels),
        "ownerReferences": [{"apiVersion": "flyte.org/v1", "kind": "TaskAction", "name": ta_name,
                             "uid": f"00000000-0000-4000-8000-{(s['run'] + s['action'])[:12]:0<12}",
                             "controller": True}],
        "finalizers": ["flyte/flytek8s"],
    }
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": metadata, "spec": spec}


def order_key(job):
    cluster = job["spec"]["rayClusterSpec"]
    pods = [cluster["headGroupSpec"]["template"]] + [g["template"] for g in cluster["workerGroupSpecs"]]
    return json.dumps([[[e["name"] for e in p["spec"]["containers"][0]["env"]], p["spec"]["tolerations"]]
                       for p in pods])


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    built = {}
    for s in scenarios():
        rng = random.Random(s["seed"])
        job = build(s, rng)
        twin = s.get("shuffled_from")
        while twin and order_key(job) == order_key(built[twin]):
            job = build(s, rng)
        built[s["name"]] = job
        scenario = {k: v for k, v in s.items() if k != "seed"}
        fixture = {"generatedBy": "tests/flyte-corpus/v2.py (bash tests/flyte-corpus/generate.sh)",
                   "flyte": FILES, "scenario": scenario, "rayJob": job}
        path = out / f"{s['name']}.json"
        path.write_text(json.dumps(fixture, indent=2) + "\n")
        print("wrote", path)


if __name__ == "__main__":
    main()
