#!/usr/bin/env bash
# Runs every fuzz target of the module for the given time each (go test can
# fuzz only one target per run). A crasher fails the run; go test has then
# written it under the package's testdata/fuzz/, where it belongs in the
# next commit as a regression input.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:?usage: fuzz.sh DURATION}

for pkg in $(go list ./...); do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		printf 'fuzz %-40s %s\n' "${pkg#github.com/amptcp/amptcp/}.$target" "$fuzztime"
		if ! out=$(go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg" 2>&1); then
			echo "$out"
			exit 1
		fi
	done
done
