#!/usr/bin/env bash
# Regenerates the Flyte corpus (tests/fixtures/flyte/) by running Flyte's own code:
#   v1: flyteplugins v1.13.0's Ray plugin and flytepropeller v1.13.0 (main.go);
#   v2: reproduced field by field from flyte v2.0.43's executor source (v2.py);
#   kuberay-yaml: sigs.k8s.io/yaml.YAMLToJSON, as KubeRay reads runtimeEnvYAML (kuberayyaml/).
# Needs Go, Python 3, the Go module proxy, and a clone of github.com/flyteorg/flyte with
# its tags (FLYTE_GIT=/path/to/flyte): the proxy refuses flytestdlib and flytepropeller
# v1.13.0, so their sources come from the clone. Not run in CI (several minutes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fixtures=$(cd "$here/../fixtures" && pwd)/flyte
: "${FLYTE_GIT:?set FLYTE_GIT to a clone of github.com/flyteorg/flyte (with tags)}"
export GONOSUMDB=github.com/flyteorg GOFLAGS=-mod=mod GOWORK=off

cd "$here"
for m in flytestdlib flytepropeller; do
  rm -rf ".$m" && mkdir ".$m"
  git -C "$FLYTE_GIT" archive "$m/v1.13.0" "$m" | tar -x --strip-components=1 -C ".$m"
done
mkdir -p "$fixtures/v1" "$fixtures/v2"
rm -f "$fixtures"/v1/*.json "$fixtures"/v2/*.json
# Flyte's plugin code logs at info level on stderr: kept aside, shown on failure.
go run . -out "$fixtures/v1" 2>/tmp/flyte-corpus.log || { cat /tmp/flyte-corpus.log >&2; exit 1; }
python3 v2.py "$fixtures/v2"
(cd kuberayyaml && go run . > "$fixtures/kuberay-yaml.json")
echo "fixtures written to $fixtures"
