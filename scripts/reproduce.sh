#!/usr/bin/env bash
# Runs every paper's scenario of docs/scenarios, the short versions unless
# FULL=1, each into results/reproduce-<time>/<scenario>/, prints each
# one's report, and at the end the claims of all of them in one table
# (docs/reproduction.md). A scenario whose runs fail does not stop the
# others; the status is 1 if any did.
set -uo pipefail
cd "$(dirname "$0")/.."

# The papers' scenarios, paper by paper ([A-MPTCP]'s first: make demo's).
scenarios=(
	cloud-access
	lisp-te-lip6 lisp-te-nss lisp-te-rez
	failures-aggregation failures-cc failures-delivery failures-ports
	sdn-geant-bdp sdn-geant-outage sdn-geant-alltoall sdn-ple-relays sdn-loss
	nornet-a nornet-b nornet-c nornet-d nornet-e
	binder
)
version=-short
if [[ "${FULL:-0}" == 1 ]]; then
	version=
fi
out=results/reproduce-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
status=0
dirs=()
for s in "${scenarios[@]}"; do
	echo "== $s ($(date +%H:%M:%S))"
	bin/amptcp lab run $version -o "$out/$s" "docs/scenarios/$s.yaml" || status=1
	if [[ -s "$out/$s/runs.jsonl" ]]; then
		bin/amptcp lab report "$out/$s" >"$out/$s.txt" || status=1
		dirs+=("$out/$s")
	fi
done
echo
echo "== the claims of every paper (reports: $out/*/report/report.html)"
if ((${#dirs[@]})); then
	bin/amptcp lab claims "${dirs[@]}" | tee "$out/claims.txt"
	bin/amptcp lab claims -markdown "${dirs[@]}" >"$out/claims.md"
fi
exit $status
