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
