#!/usr/bin/env bash
# Builds the pinned promtool (Prometheus' rule checker and rule unit-test runner) from the
# Go module proxy and caches it; prints its path. Prometheus' Go module versions are
# v0.<minor>.<patch> for release 3.<minor>.<patch>.
#
# Built without service discovery (`remove_all_sd`, Prometheus' own tag for custom builds
# since 3.10): the tests only check and unit-test rules, and the cloud SDKs the discovery
# plugins pull in were most of a cold build's time.
set -euo pipefail
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
exec bash "$(dirname "${BASH_SOURCE[0]}")/go-build.sh" install promtool \
  "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION" "" remove_all_sd
