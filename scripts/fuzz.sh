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
		if out=$(go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg" 2>&1); then
			continue
		fi
		# Go before 1.27 can fail a target with a bare "context deadline
		# exceeded" as -fuzztime ends (golang/go#75804). A real finding
		# always writes its input, so only that, or any other failure, counts.
		if [[ $out == *'context deadline exceeded'* && $out != *'Failing input written'* && $out != *'panic:'* ]]; then
			echo "  (ended by Go's fuzz-deadline race, golang/go#75804; nothing found)"
			continue
		fi
		echo "$out"
		exit 1
	done
done
