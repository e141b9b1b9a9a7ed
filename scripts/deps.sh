#!/usr/bin/env bash
# Installs what building and testing amptcp needs and this machine lacks:
# Debian packages, then Go tools into .tools/. Idempotent and quiet: it
# prints a line only when it installs something.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
	tshark     # interop checks of the LISP codec
	clang llvm libbpf-dev linux-libc-dev # eBPF programs
	iperf3     # throughput references
	mptcpize   # `mptcpize run iperf3`: the lab's iperf3 flows over MPTCP
	iproute2   # namespaces and links in tests
	nftables   # nft: deploy/nftables' rules, loaded in the deployment's lab
	chromium chromium-driver # the lab's live view, tested in a headless browser
)
staticcheck_version=v0.8.2 # staticcheck 2026.2.2

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	if [[ $(id -u) != 0 ]]; then
		echo "deps: not root, cannot install: ${missing[*]} (tests that need them will skip)" >&2
	else
		echo "deps: installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq >/dev/null
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
fi

mkdir -p .tools
if [[ "$(.tools/staticcheck -version 2>/dev/null)" != *"(${staticcheck_version#v})"* ]]; then
	echo "deps: installing staticcheck ${staticcheck_version}"
	GOBIN="$PWD/.tools" go install "honnef.co/go/tools/cmd/staticcheck@${staticcheck_version}"
fi
