/* The few kernel types the congestion controls touch, trimmed by hand
 * from the kernel's BTF (bpftool btf dump file /sys/kernel/btf/vmlinux
 * format c). Every struct is marked preserve_access_index, so that the
 * loader relocates each field access against the running kernel's BTF
 * (CO-RE): only the names must match, not the layout, and members left
 * out here cost nothing. Kept by hand rather than generated so that the
 * committed objects do not depend on the kernel of the machine that built
 * them. */
#pragma once

#include <linux/types.h>

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;
typedef _Bool bool;
#define true 1
#define false 0

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct netns_ipv4 {
	u8 sysctl_tcp_slow_start_after_idle;
};

struct net {
	struct netns_ipv4 ipv4;
};

typedef struct {
	struct net *net;
} possible_net_t;

struct sock_common {
	volatile unsigned char skc_state;
	possible_net_t skc_net;
};

struct sock {
	struct sock_common __sk_common;
	unsigned long sk_pacing_rate;
	unsigned long sk_max_pacing_rate;
};

struct tcp_ulp_ops {
	char name[16];
};

struct inet_connection_sock {
	const struct tcp_ulp_ops *icsk_ulp_ops;
	void *icsk_ulp_data;
	u32 icsk_rto;
	u8 icsk_ca_state : 5;
	u64 icsk_ca_priv[13];
};

struct tcp_sock {
	u32 mss_cache;
	u32 snd_cwnd;
	u8 is_cwnd_limited : 1;
	u32 snd_ssthresh;
	u32 snd_nxt;
	u32 snd_una;
	u32 srtt_us;
	u32 max_packets_out;
	u64 bytes_acked;
	u32 snd_cwnd_cnt;
	u32 snd_cwnd_clamp;
	u32 prior_cwnd;
	u32 packets_out;
	u32 sacked_out;
	u32 lost_out;
	u32 retrans_out;
	u32 prr_out;
	u32 high_seq;
	u32 undo_marker;
	u32 reordering;
	u32 lsndtime;
};

/* net/mptcp/protocol.h: the ULP data of a subflow. */
struct mptcp_subflow_context {
	u32 token;
	u32 subflow_id;
};

struct mptcp_sock {
	u32 token;
};

struct ack_sample {
	u32 pkts_acked;
	s32 rtt_us;
	u32 in_flight;
};

struct rate_sample {
	int losses;
	u32 acked_sacked;
};
union tcp_cc_info;

enum tcp_ca_event {
	CA_EVENT_TX_START = 0,
	CA_EVENT_CWND_RESTART = 1,
	CA_EVENT_COMPLETE_CWR = 2,
	CA_EVENT_LOSS = 3,
	CA_EVENT_ECN_NO_CE = 4,
	CA_EVENT_ECN_IS_CE = 5,
};

struct tcp_congestion_ops {
	u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, u32 ack, u32 acked);
	void (*set_state)(struct sock *sk, u8 new_state);
	void (*cwnd_event)(struct sock *sk, enum tcp_ca_event ev);
	void (*in_ack_event)(struct sock *sk, u32 flags);
	void (*pkts_acked)(struct sock *sk, const struct ack_sample *sample);
	u32 (*min_tso_segs)(struct sock *sk);
	void (*cong_control)(struct sock *sk, u32 ack, int flag, const struct rate_sample *rs);
	u32 (*undo_cwnd)(struct sock *sk);
	u32 (*sndbuf_expand)(struct sock *sk);
	unsigned long (*get_info)(struct sock *sk, u32 ext, int *attr, union tcp_cc_info *info);
	char name[16];
	u32 flags;
	void (*init)(struct sock *sk);
	void (*release)(struct sock *sk);
};

#pragma clang attribute pop
