#!/usr/bin/env bash
# Builds the pinned promtool (Prometheus' rule checker and rule unit-test runner) from the
# Go module proxy and caches it; prints its path. Prometheus' Go module versions are
# v0.<minor>.<patch> for release 3.<minor>.<patch>.
set -euo pipefail
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
exec bash "$(dirname "${BASH_SOURCE[0]}")/go-build.sh" install promtool \
  "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION"
