/* The congestion controls as BPF struct_ops (tcp_congestion_ops): amp_lia,
 * amp_olia, amp_balia, amp_wvegas, and amp_reno, a plain wrapper of the
 * kernel's Reno that the benchmark measures the others against.
 *
 * Set with TCP_CONGESTION on an MPTCP socket, a CC runs on every subflow;
 * the subflows of one connection find each other in amp_conns by the
 * connection's token, which the subflow context (the MPTCP ULP data)
 * carries. On a plain TCP socket each behaves as its single-path base:
 * Reno, or Vegas for amp_wvegas. The arithmetic is in ccmath.h; this file
 * moves values between the socket and it, and keeps the map.
 *
 * The Go loader loads one CC at a time (its struct_ops map, its programs,
 * and its own instance of the maps below). */
#include "vmlinux.h"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "amp.h"
#include "ccmath.h"

char _license[] SEC("license") = "GPL";

/* AMP_CONNS bounds the connections coupled at once; a subflow of one
 * more runs uncoupled (counted). Entries are allocated on demand. */
#define AMP_CONNS 16384

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, AMP_CONNS);
	__type(key, __u32);
	__type(value, struct amp_conn);
} amp_conns SEC(".maps");

/* A zeroed entry to create new ones from: struct amp_conn is too large
 * for the BPF stack next to the rest. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct amp_conn);
} amp_blank SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, AMP_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} amp_counters SEC(".maps");

/* The values of amp_priv.mptcp. */
#define AMP_PLAIN 0   /* a plain TCP socket */
#define AMP_SUBFLOW 1 /* an MPTCP subflow */
#define AMP_GAVE_UP 2 /* a subflow that found the map or its connection full */

static __always_inline void amp_count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&amp_counters, &idx);

	if (v)
		*v += 1; /* per CPU: no other writer */
}

static __always_inline struct amp_priv *amp_priv_of(struct sock *sk)
{
	return (struct amp_priv *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline void amp_load(struct sock *sk, struct amp_tcp *t)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	t->cwnd = tp->snd_cwnd;
	t->cwnd_cnt = tp->snd_cwnd_cnt;
	t->ssthresh = tp->snd_ssthresh;
	t->clamp = tp->snd_cwnd_clamp;
	t->srtt_us = tp->srtt_us >> 3;
	t->snd_nxt = tp->snd_nxt;
	t->prior_cwnd = tp->prior_cwnd;
	t->bytes_acked = tp->bytes_acked;
	/* tcp_is_cwnd_limited(): in slow start, let cwnd reach twice what
	 * was in flight. */
	t->cwnd_limited = BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
	if (!t->cwnd_limited && t->cwnd < t->ssthresh)
		t->cwnd_limited = t->cwnd < 2 * tp->max_packets_out;
}

static __always_inline void amp_store(struct sock *sk, const struct amp_tcp *t)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	tp->snd_cwnd = t->cwnd;
	tp->snd_cwnd_cnt = t->cwnd_cnt;
	tp->snd_ssthresh = t->ssthresh;
}

/* amp_subflow reads the token and subflow id of an MPTCP subflow from its
 * ULP data: false for any other socket. */
static __always_inline bool amp_subflow(struct sock *sk, __u32 *token, __u32 *id)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	const struct tcp_ulp_ops *ops = icsk->icsk_ulp_ops;
	struct mptcp_subflow_context *ctx;
	char name[6] = {};

	if (!ops)
		return false;
	if (bpf_core_read(name, sizeof(name), &ops->name))
		return false;
	if (name[0] != 'm' || name[1] != 'p' || name[2] != 't' || name[3] != 'c' || name[4] != 'p' || name[5])
		return false;
	ctx = icsk->icsk_ulp_data;
	if (!ctx)
		return false;
	*token = BPF_CORE_READ(ctx, token);
	*id = BPF_CORE_READ(ctx, subflow_id);
	if (!*id)
		*id = 0x80000000; /* ids count from 1; 0 marks a free slot */
	return true;
}

/* amp_couple returns the connection's entry with this subflow's slot in
 * it, creating or claiming what is missing; NULL when the socket is not
 * (or cannot be) coupled. */
static __always_inline struct amp_conn *amp_couple(__u32 algo, struct sock *sk, struct amp_priv *p)
{
	struct amp_conn *c, *blank;
	__u32 key, zero = 0, id = 0;
	int slot;

	if (p->mptcp != AMP_SUBFLOW)
		return NULL;
	if (!p->token) {
		/* The token may come after init on some subflows. */
		if (!amp_subflow(sk, &key, &id) || !key)
			return NULL;
		p->token = key;
	}
	key = p->token; /* a map key must be on the stack, not in the socket */
	c = bpf_map_lookup_elem(&amp_conns, &key);
	if (c && p->slot < AMP_SLOTS && c->slots[p->slot & (AMP_SLOTS - 1)].id == p->sub_id)
		return c;
	if (!c) {
		blank = bpf_map_lookup_elem(&amp_blank, &zero);
		if (!blank)
			return NULL;
		if (bpf_map_update_elem(&amp_conns, &key, blank, BPF_NOEXIST) == 0)
			amp_count(AMP_CNT_CONN_CREATED);
		c = bpf_map_lookup_elem(&amp_conns, &key);
		if (!c) {
			amp_count(AMP_CNT_MAP_FULL);
			p->mptcp = AMP_GAVE_UP;
			return NULL;
		}
		c->algo = algo;
	}
	slot = amp_claim(c, p->sub_id);
	if (slot < 0) {
		amp_count(AMP_CNT_SLOTS_FULL);
		p->mptcp = AMP_GAVE_UP;
		p->slot = AMP_NO_SLOT;
		return NULL;
	}
	p->slot = slot;
	/* A new slot starts from this subflow's own loss history. */
	return c;
}

static __always_inline void amp_bpf_init(__u32 algo, struct sock *sk)
{
	struct amp_priv *p = amp_priv_of(sk);
	struct amp_tcp t;
	__u32 token = 0, id = 0;

	amp_load(sk, &t);
	p->token = 0;
	p->sub_id = 0;
	p->slot = AMP_NO_SLOT;
	p->mptcp = AMP_PLAIN;
	if (amp_subflow(sk, &token, &id)) {
		p->mptcp = AMP_SUBFLOW;
		p->token = token;
		p->sub_id = id;
	}
	amp_init(algo, p, &t);
}

static __always_inline void amp_bpf_release(struct sock *sk)
{
	struct amp_priv *p = amp_priv_of(sk);
	struct amp_conn *c;
	__u32 key = p->token, slot = p->slot;

	if (slot >= AMP_SLOTS || !key)
		return;
	p->slot = AMP_NO_SLOT;
	c = bpf_map_lookup_elem(&amp_conns, &key);
	if (!c || c->slots[slot & (AMP_SLOTS - 1)].id != p->sub_id)
		return;
	if (amp_leave(c, slot & (AMP_SLOTS - 1))) {
		bpf_map_delete_elem(&amp_conns, &key);
		amp_count(AMP_CNT_CONN_DELETED);
	}
}

static __always_inline void amp_bpf_cong_avoid(__u32 algo, struct sock *sk, __u32 ack, __u32 acked)
{
	struct amp_priv *p = amp_priv_of(sk);
	struct amp_conn *c = amp_couple(algo, sk, p);
	struct amp_tcp t;

	amp_count(AMP_CNT_ACKS);
	if (c)
		amp_count(AMP_CNT_COUPLED_ACKS);
	amp_load(sk, &t);
	amp_cong_avoid(algo, c, p, &t, ack, acked);
	amp_store(sk, &t);
}

static __always_inline __u32 amp_bpf_ssthresh(__u32 algo, struct sock *sk)
{
	struct amp_priv *p = amp_priv_of(sk);
	struct amp_conn *c = amp_couple(algo, sk, p);
	struct amp_tcp t;

	amp_count(AMP_CNT_LOSSES);
	amp_load(sk, &t);
	return amp_ssthresh(algo, c, p, &t);
}

static __always_inline void amp_bpf_set_state(__u32 algo, struct sock *sk, __u8 state)
{
	struct amp_priv *p = amp_priv_of(sk);
	struct amp_conn *c = amp_couple(algo, sk, p);
	struct amp_tcp t;

	amp_load(sk, &t);
	amp_set_state(algo, c, p, &t, state);
}

static __always_inline __u32 amp_bpf_undo(struct sock *sk)
{
	struct amp_tcp t;

	amp_load(sk, &t);
	return amp_reno_undo(&t);
}

/* AMP_CC defines the programs of the congestion control amp_NAME. */
#define AMP_CC(NAME, ALGO)                                                                   \
	SEC("struct_ops")                                                                    \
	void BPF_PROG(NAME##_init, struct sock *sk) { amp_bpf_init(ALGO, sk); }              \
	SEC("struct_ops")                                                                    \
	void BPF_PROG(NAME##_release, struct sock *sk) { amp_bpf_release(sk); }              \
	SEC("struct_ops")                                                                    \
	void BPF_PROG(NAME##_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)            \
	{                                                                                    \
		amp_bpf_cong_avoid(ALGO, sk, ack, acked);                                    \
	}                                                                                    \
	SEC("struct_ops")                                                                    \
	__u32 BPF_PROG(NAME##_ssthresh, struct sock *sk) { return amp_bpf_ssthresh(ALGO, sk); } \
	SEC("struct_ops")                                                                    \
	void BPF_PROG(NAME##_set_state, struct sock *sk, __u8 state)                         \
	{                                                                                    \
		amp_bpf_set_state(ALGO, sk, state);                                          \
	}                                                                                    \
	SEC("struct_ops")                                                                    \
	__u32 BPF_PROG(NAME##_undo_cwnd, struct sock *sk) { return amp_bpf_undo(sk); }

AMP_CC(lia, AMP_LIA)
AMP_CC(olia, AMP_OLIA)
AMP_CC(balia, AMP_BALIA)
AMP_CC(wvegas, AMP_WVEGAS)

/* wVegas also takes the RTT of every ACK and the restarts after idle. */
SEC("struct_ops")
void BPF_PROG(wvegas_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	amp_pkts_acked(AMP_WVEGAS, amp_priv_of(sk), sample->rtt_us);
}

SEC("struct_ops")
void BPF_PROG(wvegas_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct amp_tcp t;

	amp_load(sk, &t);
	amp_cwnd_event(AMP_WVEGAS, amp_priv_of(sk), &t, ev);
}

/* TCP_CONG_NON_RESTRICTED: listed in net.ipv4.tcp_allowed_congestion_control
 * from registration on, so that a network namespace may make it its
 * default; a replacement registered over the link keeps it. */
#define AMP_NON_RESTRICTED 0x1

#define AMP_OPS(NAME)                                                                        \
	.init = (void *)NAME##_init, .release = (void *)NAME##_release,                     \
	.cong_avoid = (void *)NAME##_cong_avoid, .ssthresh = (void *)NAME##_ssthresh,       \
	.set_state = (void *)NAME##_set_state, .undo_cwnd = (void *)NAME##_undo_cwnd,       \
	.flags = AMP_NON_RESTRICTED, .name = "amp_" #NAME

SEC(".struct_ops.link")
struct tcp_congestion_ops amp_lia = {AMP_OPS(lia)};

SEC(".struct_ops.link")
struct tcp_congestion_ops amp_olia = {AMP_OPS(olia)};

SEC(".struct_ops.link")
struct tcp_congestion_ops amp_balia = {AMP_OPS(balia)};

SEC(".struct_ops.link")
struct tcp_congestion_ops amp_wvegas = {
	AMP_OPS(wvegas),
	.pkts_acked = (void *)wvegas_pkts_acked,
	.cwnd_event = (void *)wvegas_cwnd_event,
};

/* amp_reno: the kernel's Reno behind a BPF wrapper, the cost reference. */
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

SEC("struct_ops")
void BPF_PROG(reno_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
__u32 BPF_PROG(reno_ssthresh, struct sock *sk) { return tcp_reno_ssthresh(sk); }

SEC("struct_ops")
__u32 BPF_PROG(reno_undo_cwnd, struct sock *sk) { return tcp_reno_undo_cwnd(sk); }

SEC(".struct_ops.link")
struct tcp_congestion_ops amp_reno = {
	.cong_avoid = (void *)reno_cong_avoid,
	.ssthresh = (void *)reno_ssthresh,
	.undo_cwnd = (void *)reno_undo_cwnd,
	.flags = AMP_NON_RESTRICTED,
	.name = "amp_reno",
};
