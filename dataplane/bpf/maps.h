/* The maps of the LISP data plane. Sizes given here are defaults: the
 * loader sets the map-cache's and the subflow table's from the
 * configuration. */
#pragma once

#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, struct mc_key4);
	__type(value, struct mc_entry);
} mapcache4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, struct mc_key6);
	__type(value, struct mc_entry);
} mapcache6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct rloc_key);
	__type(value, __u32); /* ifindex */
} rlocs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32); /* ifindex */
	__type(value, struct egress);
} egress_ifs SEC(".maps");

/* When each missing EID was last reported: misses are reported at most
 * once per cfg_miss_interval_ns. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct miss);
	__type(value, __u64);
} miss_seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} misses SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct flow_key);
	__type(value, struct subflow);
} subflows SEC(".maps");

/* Hints that spare packets of flows that are no MPTCP subflow the
 * lookup in subflows: each slot holds the epoch in which a subflow whose
 * flow hashes to it was last seen. The Go side moves the epoch on only
 * right after removing the subflows idle for the idle timeout, and at
 * most once per idle timeout (stats.go): so every subflow in the table
 * was seen in the current epoch or the one before, and one more epoch
 * leaves room for a packet that read the epoch as it moved on. A packet
 * whose slot is older is no subflow's; a slot that flows share only
 * costs them a lookup. */
#define SUBFLOW_HINTS 65536
#define SUBFLOW_HINT_EPOCHS 2 /* a slot this much older than the epoch is fresh */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SUBFLOW_HINTS);
	__type(key, __u32);
	__type(value, __u32);
} subflow_hints SEC(".maps");

/* The current epoch of subflow_hints, set so that empty slots are old. */
volatile __u32 subflow_epoch = SUBFLOW_HINT_EPOCHS + 1;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, __u64);
	__type(value, struct conn);
} conns SEC(".maps");

/* MPTCP tokens (as on the wire) of the connections' keys: an MP_JOIN
 * names its connection by the receiver's token. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u64);
} tokens SEC(".maps");

/* Stateful binding: the ITR reports each new subflow it binds, and the
 * control plane answers with the path the destination's ETR chose, which
 * the subflow's next packet takes up (NO_PATH: none, it stays). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} subflow_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct flow_key);
	__type(value, __u32);
} subflow_pins SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_PATHS);
	__type(key, __u32);
	__type(value, struct path_stats);
} itr_paths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_PATHS);
	__type(key, __u32);
	__type(value, struct path_stats);
} rtr_paths SEC(".maps");

/* is_rloc reports whether a is one of our RLOCs. Global: checked on its
 * own, as the verifier of Linux 6.18 fails on it inlined in underlay
 * once there are three RLOCs ("verifier bug: stack slot 17, total slots
 * 14" in __mark_chain_precision). */
__noinline int is_rloc(__u32 family, const struct addr *a)
{
	if (!a)
		return 0;
	__u32 n = cfg_n_rlocs;
#pragma unroll
	for (__u32 i = 0; i < FAST_RLOCS; i++) {
		if (i >= n)
			return 0;
		const volatile struct rloc_key *k = &cfg_rlocs[i];
		if (k->family == family && k->addr.a[0] == a->a[0] && k->addr.a[1] == a->a[1] &&
		    k->addr.a[2] == a->a[2] && k->addr.a[3] == a->a[3])
			return 1;
	}
	struct rloc_key rk = {.family = family, .addr = *a};
	return bpf_map_lookup_elem(&rlocs, &rk) != NULL;
}

/* egress_of copies what the RLOC interface ifindex sends with into eg;
 * it returns -1 when ifindex is no RLOC interface. */
static __always_inline int egress_of(__u32 ifindex, struct egress *eg)
{
	__u32 n = cfg_n_egress;
#pragma unroll
	for (__u32 i = 0; i < FAST_EGRESS; i++) {
		if (i >= n)
			return -1;
		if (cfg_egress[i].ifindex == ifindex) {
			*eg = cfg_egress[i].eg;
			return 0;
		}
	}
	struct egress *m = bpf_map_lookup_elem(&egress_ifs, &ifindex);
	if (!m)
		return -1;
	*eg = *m;
	return 0;
}

static __always_inline void count(enum counter c)
{
	__u32 k = c;
	__u64 *v = bpf_map_lookup_elem(&counters, &k);
	if (v)
		(*v)++;
}

static __always_inline void count_path(void *map, __u32 path, __u32 bytes)
{
	struct path_stats *s = bpf_map_lookup_elem(map, &path);
	if (s) {
		s->packets++;
		s->bytes += bytes;
	}
}
