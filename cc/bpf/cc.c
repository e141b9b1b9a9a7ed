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

/* The sweeper: a timer that removes the entries of connections none of
 * whose subflows ran a callback for AMP_IDLE_NS. The kernel does not call
 * release on every subflow it ran the control on (we see it miss about
 * one in a hundred, those whose init it skipped as well), so without it
 * their entries would stay. An idle connection that loses its entry
 * gets a new one at its next ACK. */
#define AMP_IDLE_NS (10ULL * 1000000000)
#define AMP_SWEEP_NS (5ULL * 1000000000)

struct amp_sweeper {
	struct bpf_timer timer;
	__u32 armed;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct amp_sweeper);
} amp_sweep SEC(".maps");

/* amp_established: ESTABLISHED or a state after it (include/net/tcp_states.h). */
static __always_inline bool amp_established(struct sock *sk)
{
	unsigned char st = sk->__sk_common.skc_state;

	return st == 1 || st == 4 || st == 5 || st == 8 || st == 9 || st == 11;
}

/* The values of amp_priv.mptcp. */
#define AMP_PLAIN 0   /* a plain TCP socket */
#define AMP_SUBFLOW 1 /* an MPTCP subflow */
#define AMP_GAVE_UP 2 /* a subflow that found the map or its connection full */

static __always_inline void amp_count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&amp_counters, &idx);

	/* Atomic although per CPU: a program in process context (a socket's
	 * backlog) can be interrupted by one in softirq on the same CPU. */
	if (v)
		__sync_fetch_and_add(v, 1);
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

/* amp_sane guards against windows that no control set. On MPTCP subflows
 * under heavy loss the kernel sometimes enters recovery with a threshold
 * of about 2^31 packets that the control's ssthresh never returned
 * (2,165,326,096 in every case traced). PRR then sets the window to
 * threshold × delivered / prior window, hundreds of millions of packets,
 * and the subflow floods its path until recovery ends; an undo carries
 * such a window on through prior_cwnd. The kernel itself only lowers a
 * window, or sets it to a threshold or a window the control set before;
 * so a threshold or window more than AMP_INSANE times the largest this
 * control ever set (plus 64) is brought back to the last threshold it
 * returned, and counted. It runs at every callback, and through
 * amp_repair on every ACK. */
#define AMP_INSANE 16

static __always_inline __u64 amp_bound(const struct amp_priv *p)
{
	return (__u64)p->max_set * AMP_INSANE + 64;
}

static __always_inline void amp_sane(struct sock *sk, struct amp_priv *p)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u64 bound = amp_bound(p);
	__u32 ss = tp->snd_ssthresh, cwnd = tp->snd_cwnd;

	if (!p->ready || !p->last_ss)
		return;
	if (ss != 0x7fffffff && ss > bound) {
		tp->snd_ssthresh = p->last_ss;
		amp_count(AMP_CNT_INSANE);
	}
	/* Not a window PRR set to what is in flight after a burst: it sends
	 * nothing more. */
	if (cwnd > bound && cwnd > tp->packets_out) {
		tp->snd_cwnd = p->last_ss;
		amp_count(AMP_CNT_INSANE);
	}
}

static __always_inline void amp_store(struct sock *sk, const struct amp_tcp *t)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	tp->snd_cwnd = t->cwnd;
	tp->snd_cwnd_cnt = t->cwnd_cnt;
	tp->snd_ssthresh = t->ssthresh;
}

static long amp_sweep_one(void *map, __u32 *key, struct amp_conn *c, __u64 *now)
{
	__u64 newest = 0;
	int i;

	for (i = 0; i < AMP_SLOTS; i++)
		if (c->slots[i].id && c->slots[i].seen > newest)
			newest = c->slots[i].seen;
	if (newest + AMP_IDLE_NS < *now) {
		bpf_map_delete_elem(map, key);
		amp_count(AMP_CNT_SWEPT);
	}
	return 0;
}

/* amp_sweep_all runs every AMP_SWEEP_NS from the first entry on, for as
 * long as the map lives (the kernel cancels the timer with it): cheap on
 * an empty map, and no race between the last entry going and a new one. */
static int amp_sweep_all(void *map, __u32 *key, struct amp_sweeper *sw)
{
	__u64 now = bpf_ktime_get_ns();

	bpf_for_each_map_elem(&amp_conns, amp_sweep_one, &now, 0);
	bpf_timer_start(&sw->timer, AMP_SWEEP_NS, 0);
	return 0;
}

/* amp_arm starts the sweeper unless it runs. */
static __always_inline void amp_arm(void)
{
	__u32 zero = 0;
	struct amp_sweeper *sw = bpf_map_lookup_elem(&amp_sweep, &zero);

	if (!sw || sw->armed || __sync_val_compare_and_swap(&sw->armed, 0, 1) != 0)
		return;
	bpf_timer_init(&sw->timer, &amp_sweep, 1 /* CLOCK_MONOTONIC */); /* -EBUSY after the first */
	bpf_timer_set_callback(&sw->timer, amp_sweep_all);
	bpf_timer_start(&sw->timer, AMP_SWEEP_NS, 0);
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

	/* Only once established. When MPTCP disconnects a subflow
	 * (tcp_disconnect) the kernel calls release only if the control was
	 * initialized, so a slot taken by one whose SYN timed out (which calls
	 * ssthresh before init) and that never gets established would outlive
	 * it. Established sockets are initialized: by init, or (we see it on
	 * a few subflows whose SYN was lost) with init skipped, which our
	 * first callback makes up for. */
	if (p->mptcp != AMP_SUBFLOW || !amp_established(sk))
		return NULL;
	if (!p->token) {
		/* The token may come after init on some subflows. */
		if (!amp_subflow(sk, &key, &id) || !key)
			return NULL;
		p->token = key;
	}
	key = p->token; /* a map key must be on the stack, not in the socket */
	c = bpf_map_lookup_elem(&amp_conns, &key);
	if (c && p->slot < AMP_SLOTS && c->slots[p->slot & (AMP_SLOTS - 1)].id == p->sub_id) {
		c->slots[p->slot & (AMP_SLOTS - 1)].seen = bpf_ktime_get_ns();
		return c;
	}
	if (!c) {
		blank = bpf_map_lookup_elem(&amp_blank, &zero);
		if (!blank)
			return NULL;
		if (bpf_map_update_elem(&amp_conns, &key, blank, BPF_NOEXIST) == 0) {
			amp_count(AMP_CNT_CONN_CREATED);
			amp_arm();
		}
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
	c->slots[slot & (AMP_SLOTS - 1)].seen = bpf_ktime_get_ns();
	return c;
}

/* amp_start sets up the socket's state: from init, or from a callback
 * that comes first (ready is 0 in the state the kernel zeroes when it
 * assigns a congestion control): a SYN that times out calls ssthresh
 * before the connection is established and init runs. */
static __always_inline void amp_start(__u32 algo, struct sock *sk, struct amp_priv *p, bool init)
{
	struct amp_tcp t;
	__u32 token = 0, id = 0;

	amp_load(sk, &t);
	p->ready = 1;
	p->token = 0;
	p->sub_id = 0;
	p->slot = AMP_NO_SLOT;
	p->mptcp = AMP_PLAIN;
	if (amp_subflow(sk, &token, &id)) {
		p->mptcp = AMP_SUBFLOW;
		p->token = token;
		p->sub_id = id;
	}
	if (init)
		amp_count(p->mptcp == AMP_SUBFLOW ? AMP_CNT_SUBFLOWS : AMP_CNT_PLAIN);
	amp_init(algo, p, &t);
	/* Join the connection now (a subflow that started before init finds
	 * its slot again by its id): a subflow that the scheduler leaves idle
	 * still shows, and counts once it has an RTT. */
	amp_publish(amp_couple(algo, sk, p), p, &t);
}

static __always_inline void amp_bpf_init(__u32 algo, struct sock *sk)
{
	amp_start(algo, sk, amp_priv_of(sk), true);
}

/* amp_ready makes sure the socket's state is set up. */
static __always_inline struct amp_priv *amp_ready(__u32 algo, struct sock *sk)
{
	struct amp_priv *p = amp_priv_of(sk);

	if (!p->ready) {
		amp_count(AMP_CNT_EARLY);
		amp_start(algo, sk, p, false);
	}
	return p;
}

static __always_inline void amp_bpf_release(struct sock *sk)
{
	struct amp_priv *p = amp_priv_of(sk);
	struct amp_conn *c;
	__u32 key = p->token, id = p->sub_id;
	int slot;

	/* Found by token and id rather than by the socket's own state, which
	 * the kernel may have zeroed since the slot was taken. */
	if (!p->ready && !amp_subflow(sk, &key, &id))
		return;
	p->slot = AMP_NO_SLOT;
	if (!key)
		return;
	c = bpf_map_lookup_elem(&amp_conns, &key);
	if (!c)
		return;
	slot = amp_find(c, id);
	if (slot >= 0 && amp_leave(c, slot)) {
		bpf_map_delete_elem(&amp_conns, &key);
		amp_count(AMP_CNT_CONN_DELETED);
	}
}

static __always_inline void amp_bpf_cong_avoid(__u32 algo, struct sock *sk, __u32 ack, __u32 acked)
{
	struct amp_priv *p = amp_ready(algo, sk);
	struct amp_conn *c = amp_couple(algo, sk, p);
	struct amp_tcp t;

	amp_count(AMP_CNT_ACKS);
	if (c)
		amp_count(AMP_CNT_COUPLED_ACKS);
	amp_sane(sk, p);
	amp_load(sk, &t);
	if (t.cwnd > p->max_set)
		p->max_set = t.cwnd; /* the initial window, the kernel's */
	amp_cong_avoid(algo, c, p, &t, ack, acked);
	amp_store(sk, &t);
	if (t.cwnd > p->max_set)
		p->max_set = t.cwnd;
}

static __always_inline __u32 amp_bpf_ssthresh(__u32 algo, struct sock *sk)
{
	struct amp_priv *p = amp_ready(algo, sk);
	struct amp_conn *c = amp_couple(algo, sk, p);
	struct amp_tcp t;

	__u32 ss;

	amp_count(AMP_CNT_LOSSES);
	amp_sane(sk, p);
	amp_load(sk, &t);
	ss = amp_ssthresh(algo, c, p, &t);
	p->last_ss = ss;
	if (ss > p->max_set)
		p->max_set = ss;
	return ss;
}

/* The controls implement cong_control, so the kernel leaves three things
 * of its own to them (net/ipv4/tcp_input.c, tcp_cong_control and
 * tcp_end_cwnd_reduction): the proportional rate reduction (PRR, RFC 6937)
 * in CWR and Recovery, the window set to the threshold when a reduction
 * ends, and the pacing rate. They do each as the kernel does. Why: the
 * kernel sometimes enters recovery without calling the control (see
 * amp_sane), with a threshold of about 2^31 packets, and its PRR turned
 * that into a window of hundreds of millions of packets within the same
 * ACK, which sent hundreds or thousands of segments at once. With
 * cong_control, nothing sets the window on such an ACK, and the next one
 * repairs the threshold (amp_repair) before PRR uses it. */

/* Kernel values the kernel does not export (include/net/tcp.h,
 * net/ipv4/tcp_input.c): the ACK flags cong_control gets and the
 * default net.ipv4.tcp_reordering. */
#define AMP_FLAG_DATA_ACKED 0x04
#define AMP_FLAG_DATA_SACKED 0x20
#define AMP_FLAG_SND_UNA_ADVANCED 0x400
#define AMP_FLAG_FORWARD_PROGRESS (AMP_FLAG_DATA_ACKED | AMP_FLAG_DATA_SACKED)
#define AMP_REORDERING 3

static __always_inline __u8 amp_ca_state(struct sock *sk)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;

	return BPF_CORE_READ_BITFIELD(icsk, icsk_ca_state);
}

/* amp_in_flight is tcp_packets_in_flight. */
static __always_inline __u32 amp_in_flight(const struct tcp_sock *tp)
{
	return tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
}

/* amp_prr is tcp_cwnd_reduction (amp_prr_cwnd), with the packets
 * delivered since the reduction began counted here: the kernel keeps its
 * count only where it runs PRR itself. */
static __always_inline void amp_prr(struct sock *sk, struct amp_priv *p, __u32 newly, int newly_lost, int flag)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	if (p->prr_high != tp->high_seq) {
		p->prr_high = tp->high_seq;
		p->prr_delivered = 0;
	}
	if ((int)newly <= 0 || !tp->prior_cwnd)
		return;
	p->prr_delivered += newly;
	tp->snd_cwnd = amp_prr_cwnd(tp->snd_ssthresh, amp_in_flight(tp), tp->prior_cwnd, p->prr_delivered,
				    tp->prr_out, newly, newly_lost, flag & AMP_FLAG_SND_UNA_ADVANCED);
}

/* amp_end_reduction is tcp_end_cwnd_reduction, at the state change that
 * follows it (set_state runs before the kernel stores the new state): out
 * of CWR, or out of a Recovery that was not undone, the window is the
 * threshold. */
static __always_inline void amp_end_reduction(struct sock *sk, __u8 state)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u8 from = amp_ca_state(sk);

	if (state == AMP_CA_CWR || state == AMP_CA_RECOVERY || state == AMP_CA_LOSS)
		return;
	if (from != AMP_CA_CWR && from != AMP_CA_RECOVERY)
		return;
	if (tp->snd_ssthresh < 0x7fffffff && (from == AMP_CA_CWR || tp->undo_marker))
		tp->snd_cwnd = tp->snd_ssthresh;
}

/* amp_pacing sets the pacing rate as the kernel does after each ACK
 * (amp_pacing_rate): MPTCP's scheduler picks subflows by it. */
static __always_inline void amp_pacing(struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	sk->sk_pacing_rate = amp_pacing_rate(tp->mss_cache, tp->snd_cwnd, tp->snd_ssthresh, tp->packets_out,
					     tp->srtt_us, sk->sk_max_pacing_rate);
}

/* amp_bpf_cwnd_event restarts the window after an idle period, which the
 * kernel does only for controls without cong_control
 * (tcp_slow_start_after_idle_check): at the first packet sent with none
 * out (CA_EVENT_TX_START), when lsndtime still holds the last send, a
 * window idle for more than an RTO is cut (amp_restart_cwnd) and the
 * threshold keeps three quarters of it, unless
 * net.ipv4.tcp_slow_start_after_idle is off. wVegas also starts a new
 * round of measurements then. */
#define AMP_INIT_CWND 10 /* TCP_INIT_CWND; a route's initcwnd is not read */

static __always_inline void amp_bpf_cwnd_event(__u32 algo, struct sock *sk, __u32 ev)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct amp_priv *p = amp_ready(algo, sk);
	__s32 idle = (__s32)((__u32)bpf_jiffies64() - tp->lsndtime);
	struct amp_tcp t;

	if (ev == AMP_EV_TX_START && !tp->packets_out && idle > (__s32)icsk->icsk_rto &&
	    sk->__sk_common.skc_net.net->ipv4.sysctl_tcp_slow_start_after_idle) {
		amp_load(sk, &t);
		tp->snd_ssthresh = amp_current_ssthresh(&t);
		tp->snd_cwnd = amp_restart_cwnd(t.cwnd, AMP_INIT_CWND, idle, icsk->icsk_rto);
	}
	amp_load(sk, &t);
	amp_cwnd_event(algo, p, &t, ev);
}

static __always_inline void amp_bpf_set_state(__u32 algo, struct sock *sk, __u8 state)
{
	struct amp_priv *p = amp_priv_of(sk);
	struct amp_conn *c;
	struct amp_tcp t;

	/* Not before the socket started: tcp_disconnect sets Open after it
	 * zeroed the state, and a SYN's timeout calls ssthresh first. */
	if (!p->ready)
		return;
	c = amp_couple(algo, sk, p);

	amp_sane(sk, p);
	amp_end_reduction(sk, state);
	amp_load(sk, &t);
	amp_set_state(algo, c, p, &t, state);
}

/* amp_bpf_undo restores the window before a reduction the kernel found
 * spurious, but not one that amp_sane would bring back: the kernel copied
 * prior_cwnd from the window when the reduction began, which may have been
 * one of its own (see amp_sane). */
static __always_inline __u32 amp_bpf_undo(struct sock *sk)
{
	struct amp_priv *p = amp_priv_of(sk);
	struct amp_tcp t;

	amp_sane(sk, p);
	amp_load(sk, &t);
	if (p->ready && p->last_ss && t.prior_cwnd > amp_bound(p)) {
		t.prior_cwnd = 0;
		amp_count(AMP_CNT_INSANE);
	}
	return amp_reno_undo(&t);
}

/* amp_repair runs at the start of cong_control, on every ACK. A threshold
 * far above any this control returned means the kernel began a reduction
 * without calling its ssthresh (traced: the threshold the kernel took was
 * 2,165,326,096, the control's own state showed no call): it runs
 * ssthresh now, on the window the reduction began from, so that the
 * subflow reduces as it would have. */
static __always_inline void amp_repair(__u32 algo, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct amp_priv *p = amp_priv_of(sk);
	__u32 ss = tp->snd_ssthresh;
	struct amp_conn *c;
	struct amp_tcp t;

	if (!p->ready || !p->last_ss || ss == 0x7fffffff || ss <= amp_bound(p)) {
		amp_sane(sk, p);
		return;
	}
	c = amp_couple(algo, sk, p);
	amp_load(sk, &t);
	t.cwnd = t.prior_cwnd && t.prior_cwnd <= amp_bound(p) ? t.prior_cwnd : p->last_ss;
	ss = amp_ssthresh(algo, c, p, &t);
	tp->snd_ssthresh = ss;
	p->last_ss = ss;
	if (ss > p->max_set)
		p->max_set = ss;
	amp_count(AMP_CNT_INSANE);
	amp_sane(sk, p);
}

/* amp_bpf_cong_control is tcp_cong_control: in CWR and Recovery the
 * window follows PRR, otherwise it grows (cong_avoid) when the ACK
 * delivered data in order, or any data once reordering was seen. */
static __always_inline void amp_bpf_cong_control(__u32 algo, struct sock *sk, __u32 ack, int flag,
						 const struct rate_sample *rs)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u8 state = amp_ca_state(sk);
	int progress = tp->reordering > AMP_REORDERING ? flag & AMP_FLAG_FORWARD_PROGRESS
						       : flag & AMP_FLAG_DATA_ACKED;

	amp_repair(algo, sk);
	if (state == AMP_CA_CWR || state == AMP_CA_RECOVERY)
		amp_prr(sk, amp_priv_of(sk), rs->acked_sacked, rs->losses, flag);
	else if (progress)
		amp_bpf_cong_avoid(algo, sk, ack, rs->acked_sacked);
	amp_pacing(sk);
}

/* AMP_CC defines the programs of the congestion control amp_NAME. It has
 * no cong_avoid: the kernel calls it only for controls without
 * cong_control (tcp_cong_control), and cong_control grows the window
 * itself (amp_bpf_cong_avoid). */
#define AMP_CC(NAME, ALGO)                                                                   \
	SEC("struct_ops")                                                                    \
	void BPF_PROG(NAME##_init, struct sock *sk) { amp_bpf_init(ALGO, sk); }              \
	SEC("struct_ops")                                                                    \
	void BPF_PROG(NAME##_release, struct sock *sk) { amp_bpf_release(sk); }              \
	SEC("struct_ops")                                                                    \
	__u32 BPF_PROG(NAME##_ssthresh, struct sock *sk) { return amp_bpf_ssthresh(ALGO, sk); } \
	SEC("struct_ops")                                                                    \
	void BPF_PROG(NAME##_set_state, struct sock *sk, __u8 state)                         \
	{                                                                                    \
		amp_bpf_set_state(ALGO, sk, state);                                          \
	}                                                                                    \
	SEC("struct_ops")                                                                    \
	__u32 BPF_PROG(NAME##_undo_cwnd, struct sock *sk) { return amp_bpf_undo(sk); }      \
	SEC("struct_ops")                                                                    \
	void BPF_PROG(NAME##_cwnd_event, struct sock *sk, enum tcp_ca_event ev)              \
	{                                                                                    \
		amp_bpf_cwnd_event(ALGO, sk, ev);                                            \
	}                                                                                    \
	SEC("struct_ops")                                                                    \
	void BPF_PROG(NAME##_cong_control, struct sock *sk, __u32 ack, int flag,             \
		      const struct rate_sample *rs)                                          \
	{                                                                                    \
		amp_bpf_cong_control(ALGO, sk, ack, flag, rs);                               \
	}

AMP_CC(lia, AMP_LIA)
AMP_CC(olia, AMP_OLIA)
AMP_CC(balia, AMP_BALIA)
AMP_CC(wvegas, AMP_WVEGAS)

/* wVegas also takes the RTT of every ACK. */
SEC("struct_ops")
void BPF_PROG(wvegas_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	amp_pkts_acked(AMP_WVEGAS, amp_ready(AMP_WVEGAS, sk), sample->rtt_us);
}

/* TCP_CONG_NON_RESTRICTED: listed in net.ipv4.tcp_allowed_congestion_control
 * from registration on, so that a network namespace may make it its
 * default; a replacement registered over the link keeps it. */
#define AMP_NON_RESTRICTED 0x1

#define AMP_OPS(NAME)                                                                        \
	.init = (void *)NAME##_init, .release = (void *)NAME##_release,                     \
	.ssthresh = (void *)NAME##_ssthresh,                                                 \
	.set_state = (void *)NAME##_set_state, .undo_cwnd = (void *)NAME##_undo_cwnd,       \
	.cong_control = (void *)NAME##_cong_control, .cwnd_event = (void *)NAME##_cwnd_event, \
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

/* amp_subflow_cc, a cgroup sockops program, sets the congestion control of
 * single MPTCP subflows as they are established, by the first rule of
 * amp_rules that matches (amptcp pm's congestion.subflows). It acts only
 * on sockets of the network namespace it was loaded for. An application
 * that sets TCP_CONGESTION on its MPTCP socket after that sets it on all
 * subflows again. */
volatile const __u64 amp_netns_cookie = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AMP_MAX_RULES);
	__type(key, __u32);
	__type(value, struct amp_rule);
} amp_rules SEC(".maps");

#define AMP_SOL_TCP 6
#define AMP_TCP_CONGESTION 13
#define AMP_AF_INET 2

SEC("sockops")
int amp_subflow_cc(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk;
	__u32 i, rtt;

	if (skops->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB && skops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB)
		return 1;
	sk = skops->sk;
	if (skops->family != AMP_AF_INET || !sk)
		return 1;
	if (amp_netns_cookie && bpf_get_netns_cookie(skops) != amp_netns_cookie)
		return 1;
	if (!bpf_skc_to_mptcp_sock(sk))
		return 1; /* not a subflow */
	rtt = skops->srtt_us >> 3;
	for (i = 0; i < AMP_MAX_RULES; i++) {
		__u32 k = i;
		struct amp_rule *r = bpf_map_lookup_elem(&amp_rules, &k);

		if (!r || !r->used)
			break;
		if ((skops->local_ip4 & r->local_mask) != r->local || (skops->remote_ip4 & r->remote_mask) != r->remote)
			continue;
		if (r->rtt_above_us && rtt <= r->rtt_above_us)
			continue;
		if (bpf_setsockopt(skops, AMP_SOL_TCP, AMP_TCP_CONGESTION, r->cc, sizeof(r->cc)) == 0)
			__sync_fetch_and_add(&r->matched, 1);
		break;
	}
	return 1;
}
