#!/usr/bin/env bash
# rayshare's main job on the built-in local cluster: builds what is needed (cached after the
# first run), starts kube-apiserver + etcd, kube-scheduler, kube-controller-manager, kwok's
# fake nodes, the KubeRay operator and rayshare, registers the webhook from the chart,
# applies the sample workloads, prints what happened, and keeps running until Ctrl-C.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tests/controlplane/build.sh >/dev/null
bash tests/tools/build-helm.sh >/dev/null
bash tests/tools/build-kuberay.sh >/dev/null
bash tests/tools/build-kwok.sh >/dev/null
bash tests/tools/crds.sh >/dev/null
RAYSHARE_DEMO_WAIT=1 exec cargo test --test demo -- --nocapture
