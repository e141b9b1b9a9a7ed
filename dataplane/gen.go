package dataplane

// The eBPF programs are compiled with Debian 12's clang 14 (-mcpu=v3: its
// BPF backend crashes on atomics without it) and committed, so that
// building lispd needs no C toolchain; `make generate` rebuilds them.
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu" -target bpfel -type mc_key4 -type mc_key6 -type mc_entry -type path -type rloc_key -type egress -type miss -type flow_key -type subflow -type conn -type path_stats lisp bpf/lisp.c
