package cc

// The programs are compiled with Debian 12's clang 14 (-mcpu=v3 for its
// atomics) and committed, so that building amptcp needs no C toolchain;
// `make generate` rebuilds them. bpf/vmlinux.h is a hand-trimmed subset of
// the kernel's types, relocated at load time (CO-RE), so the objects do
// not depend on the kernel of the machine that built them.
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu" -target bpfel -no-global-types -type amp_conn -type amp_slot -type amp_rule cc bpf/cc.c
