/* The arithmetic of the congestion controls, written from their papers'
 * equations in fixed point: no kernel access, so that the same code runs
 * in the BPF programs (cc.c copies a struct amp_tcp in and out of the
 * socket) and in user space, where the differential test drives it
 * against the Go model (cc/model).
 *
 * Windows are in packets and RTTs in microseconds, as in struct tcp_sock.
 * For subflows of equal MSS the packet forms below equal RFC 6356's byte
 * forms; the out-of-tree Linux implementations made the same choice.
 *
 * Every increase is written as a credit c per acknowledged packet in
 * units of 1/cwnd: the window grows by acked*c/cwnd, c = 1 being Reno.
 * With the normalised rates y_k = x_k / max_j x_j (x_k = w_k / rtt_k, so
 * 0 < y_k <= 1) and S = sum_k y_k (1 <= S <= AMP_SLOTS):
 *
 *   LIA (RFC 6356 §3):  per ACK min(alpha/w_total, 1/w_r), alpha =
 *     w_total * max_k(w_k/rtt_k^2) / (sum_k w_k/rtt_k)^2,
 *     so c_r = min(w_r * max_k(y_k^2/w_k) / S^2, 1).
 *   OLIA ([Khalili12] eq. 5): per ACK (w_r/rtt_r^2)/(sum_k w_k/rtt_k)^2
 *     + alpha_r/w_r, so c_r = y_r^2/S^2 + alpha_r, alpha_r from the sets
 *     of best paths and of largest windows (amp_olia_alpha).
 *   BALIA ([Peng16] eq. 16): per ACK x_r/(rtt_r (sum_k x_k)^2) *
 *     (1+a_r)/2 * (4+a_r)/5, a_r = max_k x_k / x_r, so
 *     c_r = (y_r+1)(4y_r+1) / (10 S^2); per loss w_r/2 * min(a_r, 1.5).
 *
 * wVegas ([Cao12] §III) is delay-based: per RTT its window moves by one
 * packet toward a queue of alpha_r packets, alpha_r being the subflow's
 * share of the connection's rate times a total of AMP_WVEGAS_TOTAL.
 */
#pragma once

#include "amp.h"

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#define AMP_INLINE static __always_inline

/* AMP_GLOBAL marks the functions that loop over a connection's slots. In
 * BPF they are global functions, which the verifier checks once on their
 * own rather than at every call with the caller's state: inlined, the
 * branches of eight unrolled iterations multiply past its limit of a
 * million instructions. */
#ifdef __bpf__
#define AMP_GLOBAL __attribute__((noinline))
#else
#define AMP_GLOBAL static inline
#endif

/* TCP_CA_* states and the constants of the Vegas family. */
#define AMP_CA_OPEN 0
#define AMP_CA_CWR 2
#define AMP_CA_RECOVERY 3
#define AMP_CA_LOSS 4
#define AMP_VEGAS_ALPHA 2 /* tcp_vegas.c: queue at least 2 packets */
#define AMP_VEGAS_BETA 4  /* and at most 4 */
#define AMP_VEGAS_GAMMA 1 /* leave slow start above 1 queued packet */
#define AMP_WVEGAS_TOTAL 10 /* [Cao12]: the connection's total queue target */
#define AMP_WVEGAS_MIN_ALPHA 2
#define AMP_MIN_CWND 2 /* the least window OLIA's decrease leaves */
#define AMP_EV_TX_START 0
#define AMP_EV_CWND_RESTART 1

AMP_INLINE __u32 amp_min(__u32 a, __u32 b) { return a < b ? a : b; }
AMP_INLINE __u32 amp_max(__u32 a, __u32 b) { return a > b ? a : b; }
AMP_INLINE int amp_after(__u32 a, __u32 b) { return (__s32)(b - a) < 0; }

/* amp_clamp_w and amp_clamp_rtt bound the values that enter the coupling
 * terms (amp.h). */
AMP_INLINE __u32 amp_clamp_w(__u32 w) { return w < 1 ? 1 : w > AMP_WMAX ? AMP_WMAX : w; }
AMP_INLINE __u32 amp_clamp_rtt(__u32 r) { return r < 1 ? 1 : r > AMP_RTT_MAX ? AMP_RTT_MAX : r; }

/* amp_slot_of is the slot of subflow index i, NULL for none. The mask
 * repeats the bound for the verifier, which may not see the test of a
 * value it loaded again. */
AMP_INLINE struct amp_slot *amp_slot_of(struct amp_conn *c, __u32 i)
{
	if (!c || i >= AMP_SLOTS)
		return NULL;
	return &c->slots[i & (AMP_SLOTS - 1)];
}

/* --- Reno, as net/ipv4/tcp_cong.c has it --- */

AMP_INLINE __u32 amp_slow_start(struct amp_tcp *t, __u32 acked)
{
	__u32 cwnd = amp_min(t->cwnd + acked, t->ssthresh);

	acked -= cwnd - t->cwnd;
	t->cwnd = amp_min(cwnd, t->clamp);
	return acked;
}

/* amp_ai is tcp_cong_avoid_ai: one packet more per w packets acked. */
AMP_INLINE void amp_ai(struct amp_tcp *t, __u32 w, __u32 acked)
{
	if (t->cwnd_cnt >= w) {
		t->cwnd_cnt = 0;
		t->cwnd++;
	}
	t->cwnd_cnt += acked;
	if (t->cwnd_cnt >= w) {
		__u32 delta = t->cwnd_cnt / w;

		t->cwnd_cnt -= delta * w;
		t->cwnd += delta;
	}
	t->cwnd = amp_min(t->cwnd, t->clamp);
}

AMP_INLINE void amp_reno_cong_avoid(struct amp_tcp *t, __u32 acked)
{
	if (!t->cwnd_limited)
		return;
	if (t->cwnd < t->ssthresh) {
		acked = amp_slow_start(t, acked);
		if (!acked)
			return;
	}
	amp_ai(t, t->cwnd ? t->cwnd : 1, acked);
}

AMP_INLINE __u32 amp_reno_ssthresh(const struct amp_tcp *t) { return amp_max(t->cwnd >> 1, 2); }

AMP_INLINE __u32 amp_reno_undo(const struct amp_tcp *t) { return amp_max(t->cwnd, t->prior_cwnd); }

/* amp_prr_cwnd is the window of the kernel's proportional rate reduction
 * (tcp_cwnd_reduction, RFC 6937) after an ACK in CWR or Recovery that
 * delivered newly packets: prior is the window when the reduction began,
 * delivered the packets delivered since (this ACK's included), out those
 * sent since. In flight above the threshold, the window falls in
 * proportion to what is delivered; below it, it grows by what is
 * delivered (one more when the ACK advanced snd_una and reported no new
 * loss) up to the threshold. One packet at least until the reduction
 * sent its first. The kernel's int arithmetic, kept: 64-bit where it
 * multiplies. */
AMP_INLINE __u32 amp_prr_cwnd(__u32 ssthresh, __u32 in_flight, __u32 prior, __u32 delivered, __u32 out,
			      __u32 newly, int newly_lost, int una_advanced)
{
	int delta = (int)(ssthresh - in_flight), sndcnt;

	if (delta < 0) {
		__u64 dividend = (__u64)ssthresh * delivered + prior - 1;

		sndcnt = (int)(dividend / prior) - (int)out;
	} else {
		sndcnt = (int)(delivered - out);
		if (sndcnt < (int)newly)
			sndcnt = (int)newly;
		if (una_advanced && !newly_lost)
			sndcnt++;
		if (sndcnt > delta)
			sndcnt = delta;
	}
	if (sndcnt < (out ? 0 : 1))
		sndcnt = out ? 0 : 1;
	return in_flight + sndcnt;
}

/* amp_restart_cwnd is the window after an idle period of idle jiffies
 * (tcp_cwnd_restart, RFC 5681 §4.1): halved for each whole RTO of it,
 * down to the initial window or the window if smaller. */
AMP_INLINE __u32 amp_restart_cwnd(__u32 cwnd, __u32 init, __s32 idle, __u32 rto)
{
	__u32 restart = amp_min(init, cwnd);
	int i;

	/* The kernel's loop, bounded for the verifier: after 32 halvings
	 * any window is below the initial one. */
	for (i = 0; i < 32 && (idle -= (__s32)rto) > 0 && cwnd > restart; i++)
		cwnd >>= 1;
	return amp_max(cwnd, restart);
}

/* amp_pacing_rate is the kernel's pacing rate (tcp_update_pacing_rate),
 * bytes per second: 200 % of mss × window / srtt in slow start, 120 %
 * after (net.ipv4.tcp_pacing_ss_ratio and _ca_ratio at their defaults),
 * the window at least what is out, srtt_us in 1/8 µs as the socket keeps
 * it, at most max. */
#define AMP_PACING_SS_RATIO 200
#define AMP_PACING_CA_RATIO 120

AMP_INLINE __u64 amp_pacing_rate(__u32 mss, __u32 cwnd, __u32 ssthresh, __u32 packets_out, __u32 srtt_us8,
				 __u64 max)
{
	__u64 rate = (__u64)mss * ((1000000 / 100) << 3);

	rate *= cwnd < ssthresh / 2 ? AMP_PACING_SS_RATIO : AMP_PACING_CA_RATIO;
	rate *= amp_max(cwnd, packets_out);
	if (srtt_us8)
		rate /= srtt_us8;
	return rate < max ? rate : max;
}

/* amp_credit grows (or, for OLIA, shrinks) the window by acked*c/cwnd
 * packets, c in 2^-16. |c| <= 2^17 and acked is cut to 2^16, so one
 * call adds less than 2^33 to a credit that stays within one window
 * (cwnd < 2^32, so cwnd << 16 < 2^48) of zero: no overflow. */
AMP_INLINE void amp_credit(struct amp_tcp *t, struct amp_priv *p, __s64 c, __u32 acked)
{
	__u32 cwnd = t->cwnd ? t->cwnd : 1;
	__u64 unit = (__u64)cwnd << AMP_FP;

	if (acked > 0xffff)
		acked = 0xffff;
	p->credit += c * (__s64)acked;
	if (p->credit >= (__s64)unit) {
		__u64 k = (__u64)p->credit / unit;

		p->credit -= (__s64)(k * unit);
		cwnd += (__u32)k;
	} else if (p->credit <= -(__s64)unit) {
		__u64 k = (__u64)(-p->credit) / unit;

		p->credit += (__s64)(k * unit);
		/* Not below two packets, as Linux keeps its windows: one packet
		 * and the receiver's delayed ACK would stall the subflow, and
		 * MPTCP's scheduler the connection behind it. */
		cwnd = cwnd > k + AMP_MIN_CWND ? cwnd - (__u32)k : AMP_MIN_CWND;
	}
	if (cwnd < 1)
		cwnd = 1;
	t->cwnd = amp_min(cwnd, t->clamp);
}

/* --- the coupling terms --- */

/* amp_rates are a connection's subflows as the coupled increases see
 * them: those with an RTT sample, from one snapshot of the slots. */
struct amp_rates {
	__u32 n;                  /* subflows counted */
	__u32 max;                /* a slot of the largest rate */
	__u32 w[AMP_SLOTS];       /* windows, amp_clamp_w; 0 for a slot not counted */
	__u32 rtt[AMP_SLOTS];     /* RTTs, amp_clamp_rtt */
	__u64 y[AMP_SLOTS];       /* x_k / x_max, 2^-16: at most AMP_ONE */
	__u64 sum;                /* S = sum y_k, 2^-16: between AMP_ONE and 8*AMP_ONE */
	__u64 s2;                 /* S^2, 2^-16: between 2^16 and 2^22 */
};

AMP_GLOBAL int amp_rates(const struct amp_conn *c, struct amp_rates *r)
{
	__u64 mw = 0, mr = 1;
	int m = -1, i;

	if (!c || !r)
		return -1;
	r->n = 0;
	r->sum = 0;
	for (i = 0; i < AMP_SLOTS; i++) {
		const struct amp_slot *s = &c->slots[i];
		__u32 rtt = s->rtt_us, w = s->cwnd;

		r->w[i] = 0;
		r->y[i] = 0;
		if (!s->id || !rtt)
			continue;
		w = amp_clamp_w(w);
		rtt = amp_clamp_rtt(rtt);
		r->w[i] = w;
		r->rtt[i] = rtt;
		/* w/rtt > mw/mr, cross-multiplied: both sides below 2^20 * 2^24. */
		if (m < 0 || (__u64)w * mr > mw * rtt) {
			m = i;
			mw = w;
			mr = rtt;
		}
	}
	if (m < 0)
		return -1;
	for (i = 0; i < AMP_SLOTS; i++) {
		if (!r->w[i])
			continue;
		/* y = (w/rtt) / (mw/mr): w*mr < 2^44, shifted < 2^60; at most
		 * AMP_ONE because m has the largest rate. */
		r->y[i] = (((__u64)r->w[i] * mr) << AMP_FP) / ((__u64)r->rtt[i] * mw);
		r->sum += r->y[i];
		r->n++;
	}
	r->max = m;
	r->s2 = (r->sum * r->sum) >> AMP_FP;
	if (!r->s2)
		r->s2 = 1;
	return 0;
}

/* amp_lia_credit is c_r for LIA and sets the connection's alpha. With
 * M2 = max_k y_k^2/w_k (2^-32, at most 2^32): alpha = w_total*M2/S^2,
 * w_total*M2 < 2^23 * 2^32; c_r = w_r*M2/S^2 cut at 1, w_r*M2 < 2^52. */
AMP_GLOBAL __s64 amp_lia_credit(struct amp_conn *c, const struct amp_rates *r, __u32 me)
{
	__u64 m2 = 0, wtot = 0, cr;
	int i;

	if (!c || !r)
		return AMP_ONE;
	for (i = 0; i < AMP_SLOTS; i++) {
		__u64 v;

		if (!r->w[i])
			continue;
		wtot += r->w[i];
		v = r->y[i] * r->y[i] / r->w[i];
		if (v > m2)
			m2 = v;
	}
	c->alpha = wtot * m2 / r->s2;
	if (me >= AMP_SLOTS || !r->w[me])
		return AMP_ONE;
	cr = (__u64)r->w[me] * m2 / r->s2;
	return cr > AMP_ONE ? AMP_ONE : (__s64)cr;
}

/* amp_olia_metric is l/rtt^2, the rank of a path in OLIA's set of best
 * paths, l being the bytes acknowledged between losses. l is cut at 2^36
 * so that l << 27 fits; one division by rtt at a time keeps the quotient
 * from vanishing (l = 64 KB at rtt = 1 s still ranks as 8). */
AMP_INLINE __u64 amp_olia_metric(__u64 l, __u32 rtt)
{
	if (l > (1ULL << 36))
		l = 1ULL << 36;
	return ((l << 27) / rtt) / rtt;
}

AMP_INLINE __u64 amp_olia_interval(const struct amp_slot *s)
{
	__u64 cur = s->acked - s->loss_mark;

	return cur > s->loss_prev ? cur : s->loss_prev;
}

/* amp_olia_alpha is alpha_r of [Khalili12] §IV, 2^-16: with M the paths
 * of the largest window and B those of the largest l/rtt^2 (the best
 * paths), alpha_r = 1/(n |B\M|) on a path of B\M, -1/(n |M|) on a path
 * of M, 0 elsewhere, and 0 everywhere when B\M is empty. */
AMP_GLOBAL __s64 amp_olia_alpha(const struct amp_conn *c, const struct amp_rates *r, __u32 me)
{
	__u64 metric[AMP_SLOTS], best = 0;
	__u32 wmax = 0, in_m = 0, b_not_m = 0;
	int i;

	if (!c || !r)
		return 0;
	for (i = 0; i < AMP_SLOTS; i++) {
		metric[i] = 0;
		if (!r->w[i])
			continue;
		metric[i] = amp_olia_metric(amp_olia_interval(&c->slots[i]), r->rtt[i]);
		if (metric[i] > best)
			best = metric[i];
		if (r->w[i] > wmax)
			wmax = r->w[i];
	}
	for (i = 0; i < AMP_SLOTS; i++) {
		if (!r->w[i])
			continue;
		if (r->w[i] == wmax)
			in_m++;
		else if (metric[i] == best)
			b_not_m++;
	}
	if (me >= AMP_SLOTS || !r->w[me] || !b_not_m)
		return 0;
	if (r->w[me] == wmax)
		return -(__s64)(AMP_ONE / (r->n * in_m));
	if (metric[me] == best)
		return (__s64)(AMP_ONE / (r->n * b_not_m));
	return 0;
}

/* amp_olia_credit is c_r = y_r^2/S^2 + alpha_r: y_r^2 <= 2^32 over
 * S^2 >= 2^16 gives at most AMP_ONE. */
AMP_GLOBAL __s64 amp_olia_credit(struct amp_conn *c, const struct amp_rates *r, __u32 me)
{
	__s64 alpha;

	if (!c || !r || me >= AMP_SLOTS || !r->w[me])
		return AMP_ONE;
	alpha = amp_olia_alpha(c, r, me);
	amp_slot_of(c, me)->alpha = (__s32)alpha;
	return (__s64)(r->y[me] * r->y[me] / r->s2) + alpha;
}

/* amp_balia_credit is c_r = (y_r+1)(4y_r+1)/(10 S^2): the product is
 * below 2^17 * 5*2^16, the result at most AMP_ONE. It records a_r = 1/y_r
 * (cut to fit the slot). */
AMP_GLOBAL __s64 amp_balia_credit(struct amp_conn *c, const struct amp_rates *r, __u32 me)
{
	__u64 y, a;

	if (!c || !r || me >= AMP_SLOTS || !r->w[me])
		return AMP_ONE;
	y = r->y[me] ? r->y[me] : 1;
	a = (1ULL << (2 * AMP_FP)) / y;
	amp_slot_of(c, me)->alpha = a > 0x7fffffff ? 0x7fffffff : (__s32)a;
	return (__s64)((y + AMP_ONE) * (4 * y + AMP_ONE) / (10 * r->s2));
}

/* amp_balia_ssthresh is w_r - w_r/2 * min(a_r, 1.5) with a_r = 1/y_r:
 * w_r * 1.5*2^16 < 2^49. */
AMP_GLOBAL __u32 amp_balia_ssthresh(const struct amp_conn *c, const struct amp_tcp *t, __u32 me)
{
	struct amp_rates r;
	__u64 a = 3 * AMP_ONE / 2, md;

	if (!t)
		return 2;
	if (c && me < AMP_SLOTS && !amp_rates(c, &r) && r.w[me] && r.y[me]) {
		__u64 inv = (1ULL << (2 * AMP_FP)) / r.y[me];

		if (inv < a)
			a = inv;
	} else {
		a = AMP_ONE; /* not coupled: Reno */
	}
	md = ((__u64)t->cwnd * a) >> (AMP_FP + 1);
	return t->cwnd > md + 2 ? t->cwnd - (__u32)md : 2;
}

/* --- the coupled Reno family: LIA, OLIA, BALIA --- */

/* amp_publish writes what the others need into this subflow's slot. */
AMP_INLINE void amp_publish(struct amp_conn *c, const struct amp_priv *p, const struct amp_tcp *t)
{
	struct amp_slot *s = amp_slot_of(c, p->slot);

	if (!s)
		return;
	/* While a loss is repaired the window is inflated or deflated by
	 * the recovery; the target it converges to is ssthresh. */
	s->cwnd = (p->ca_state == AMP_CA_RECOVERY || p->ca_state == AMP_CA_CWR) ? t->ssthresh : t->cwnd;
	s->rtt_us = t->srtt_us;
	s->acked = t->bytes_acked;
	s->loss_prev = p->loss_prev;
	s->loss_mark = p->loss_mark;
}

AMP_INLINE void amp_coupled_cong_avoid(__u32 algo, struct amp_conn *c, struct amp_priv *p,
				       struct amp_tcp *t, __u32 acked)
{
	struct amp_rates r;
	__s64 credit = AMP_ONE;

	amp_publish(c, p, t);
	if (!t->cwnd_limited)
		return;
	if (t->cwnd < t->ssthresh) {
		acked = amp_slow_start(t, acked);
		amp_publish(c, p, t);
		if (!acked)
			return;
	}
	if (c && !amp_rates(c, &r)) {
		if (algo == AMP_LIA)
			credit = amp_lia_credit(c, &r, p->slot);
		else if (algo == AMP_OLIA)
			credit = amp_olia_credit(c, &r, p->slot);
		else if (algo == AMP_BALIA)
			credit = amp_balia_credit(c, &r, p->slot);
	}
	amp_credit(t, p, credit, acked);
	amp_publish(c, p, t);
}

AMP_INLINE __u32 amp_coupled_ssthresh(__u32 algo, struct amp_conn *c, struct amp_priv *p,
				      struct amp_tcp *t)
{
	__u32 ss;

	/* OLIA's loss intervals: a loss closes the current one, unless
	 * nothing was acknowledged since the last (a repeated timeout). */
	if (t->bytes_acked != p->loss_mark) {
		p->loss_prev = t->bytes_acked - p->loss_mark;
		p->loss_mark = t->bytes_acked;
	}
	p->credit = 0;
	if (algo == AMP_BALIA)
		ss = amp_balia_ssthresh(c, t, p->slot);
	else
		ss = amp_reno_ssthresh(t);
	if (amp_slot_of(c, p->slot)) {
		amp_publish(c, p, t);
		amp_slot_of(c, p->slot)->cwnd = ss;
	}
	return ss;
}

/* --- Vegas (a plain TCP socket under amp_wvegas) and wVegas --- */

AMP_INLINE void amp_vegas_enable(struct amp_priv *p, const struct amp_tcp *t)
{
	p->vegas_on = 1;
	p->beg_snd_nxt = t->snd_nxt;
	p->cnt_rtt = 0;
	p->sum_rtt = 0;
	p->min_rtt = 0x7fffffff;
}

AMP_INLINE void amp_vegas_init(struct amp_priv *p, const struct amp_tcp *t)
{
	p->base_rtt = 0x7fffffff;
	p->alpha = AMP_WVEGAS_MIN_ALPHA << AMP_FP;
	p->queue_delay = 0;
	amp_vegas_enable(p, t);
}

AMP_INLINE void amp_vegas_sample(struct amp_priv *p, __s32 rtt_us)
{
	__u32 v;

	if (rtt_us < 0)
		return;
	/* tcp_vegas.c adds 1 so that a 0 µs sample still counts. */
	v = (__u32)rtt_us + 1;
	if (v < p->base_rtt)
		p->base_rtt = v;
	if (v < p->min_rtt)
		p->min_rtt = v;
	p->sum_rtt += v;
	p->cnt_rtt++;
}

/* amp_current_ssthresh is tcp_current_ssthresh in state Open. */
AMP_INLINE __u32 amp_current_ssthresh(const struct amp_tcp *t)
{
	return amp_max(t->ssthresh, (t->cwnd >> 1) + (t->cwnd >> 2));
}

AMP_INLINE void amp_vegas_bound(struct amp_tcp *t)
{
	if (t->cwnd < 2)
		t->cwnd = 2;
	else if (t->cwnd > t->clamp)
		t->cwnd = t->clamp;
	t->ssthresh = amp_current_ssthresh(t);
}

AMP_INLINE void amp_vegas_cong_avoid(struct amp_priv *p, struct amp_tcp *t, __u32 ack, __u32 acked)
{
	if (!p->vegas_on) {
		amp_reno_cong_avoid(t, acked);
		return;
	}
	if (amp_after(ack, p->beg_snd_nxt)) {
		p->beg_snd_nxt = t->snd_nxt;
		if (p->cnt_rtt <= 2) {
			amp_reno_cong_avoid(t, acked);
		} else {
			__u32 rtt = p->min_rtt, base = p->base_rtt ? p->base_rtt : 1;
			__u64 target = (__u64)t->cwnd * base / rtt;
			__u64 diff = (__u64)t->cwnd * (rtt - base) / base;

			if (diff > AMP_VEGAS_GAMMA && t->cwnd < t->ssthresh) {
				t->cwnd = amp_min(t->cwnd, (__u32)target + 1);
				t->ssthresh = amp_min(t->ssthresh, t->cwnd - 1);
			} else if (t->cwnd < t->ssthresh) {
				amp_slow_start(t, acked);
			} else if (diff > AMP_VEGAS_BETA) {
				t->cwnd--;
				t->ssthresh = amp_min(t->ssthresh, t->cwnd - 1);
			} else if (diff < AMP_VEGAS_ALPHA) {
				t->cwnd++;
			}
			amp_vegas_bound(t);
		}
		p->cnt_rtt = 0;
		p->sum_rtt = 0;
		p->min_rtt = 0x7fffffff;
	} else if (t->cwnd < t->ssthresh) {
		amp_slow_start(t, acked);
	}
}

/* amp_wvegas_weight is this subflow's share of the connection's rate,
 * 2^-16. Rates are cwnd/rtt in 2^-32 packets/µs: cwnd < 2^20 keeps each
 * below 2^52 and their sum below 2^55; both are shifted below 2^47 so
 * that the share's 16 fraction bits fit. */
AMP_GLOBAL __u64 amp_wvegas_weight(const struct amp_conn *c, __u32 me)
{
	const struct amp_slot *s = amp_slot_of((struct amp_conn *)c, me);
	__u64 total = 0, mine;
	int i;

	if (!s)
		return AMP_ONE;
	mine = s->rate;
	for (i = 0; i < AMP_SLOTS; i++)
		if (c->slots[i].id)
			total += c->slots[i].rate;
	if (!total || !mine || mine > total)
		return AMP_ONE;
	for (i = 0; i < 9 && total >= (1ULL << 47); i++) {
		total >>= 1;
		mine >>= 1;
	}
	return (mine << AMP_FP) / total;
}

/* amp_wvegas_round is [Cao12]'s once-per-RTT step on subflow me, with
 * the RTT averaged over the round. Queues are in 2^-16 packets:
 * cwnd < 2^20 and rtt - base < 2^24 keep cwnd*(rtt-base) << 16 < 2^60. */
AMP_INLINE void amp_wvegas_round(struct amp_conn *c, struct amp_priv *p, struct amp_tcp *t, __u32 acked)
{
	__u32 rtt = amp_clamp_rtt((__u32)(p->sum_rtt / p->cnt_rtt));
	__u32 base = amp_clamp_rtt(p->base_rtt), w = amp_clamp_w(t->cwnd);
	__u32 q = rtt > base ? rtt - base : 0;
	__u64 diff = (((__u64)w * q) << AMP_FP) / rtt;

	if (diff > (AMP_VEGAS_GAMMA << AMP_FP) && t->cwnd < t->ssthresh) {
		__u32 target = (__u32)((__u64)t->cwnd * base / rtt);

		t->cwnd = amp_min(t->cwnd, target + 1);
		t->ssthresh = amp_min(t->ssthresh, t->cwnd - 1);
	} else if (t->cwnd < t->ssthresh) {
		amp_slow_start(t, acked);
	} else {
		if (diff >= p->alpha) {
			/* The rate it publishes, and its share of the total. */
			__u64 weight, alpha;

			struct amp_slot *s = amp_slot_of(c, p->slot);

			if (s)
				s->rate = ((__u64)w << 32) / rtt;
			weight = amp_wvegas_weight(c, p->slot);
			alpha = weight * AMP_WVEGAS_TOTAL;
			p->alpha = (__u32)(alpha < (AMP_WVEGAS_MIN_ALPHA << AMP_FP) ? (AMP_WVEGAS_MIN_ALPHA << AMP_FP) : alpha);
		}
		if (diff > p->alpha) {
			t->cwnd--;
			t->ssthresh = amp_min(t->ssthresh, t->cwnd - 1);
		} else if (diff < p->alpha) {
			t->cwnd++;
		}
		/* Drain the queue when it has doubled since its least value
		 * and holds more than this subflow's share ([Cao12] §III.C);
		 * the second condition keeps a queue of a few µs of noise from
		 * halving the window. */
		if (!p->queue_delay || p->queue_delay > q)
			p->queue_delay = q;
		if (q >= 2 * p->queue_delay && diff > p->alpha) {
			t->cwnd = (__u32)((__u64)t->cwnd * base / (2 * (__u64)rtt));
			p->queue_delay = 0;
		}
	}
	amp_vegas_bound(t);
	if (amp_slot_of(c, p->slot)) {
		struct amp_slot *s = amp_slot_of(c, p->slot);

		if (!s->rate)
			s->rate = ((__u64)amp_clamp_w(t->cwnd) << 32) / rtt;
		s->alpha = (__s32)p->alpha;
	}
}

AMP_INLINE void amp_wvegas_cong_avoid(struct amp_conn *c, struct amp_priv *p, struct amp_tcp *t,
				      __u32 ack, __u32 acked)
{
	amp_publish(c, p, t);
	if (!p->vegas_on) {
		amp_reno_cong_avoid(t, acked);
	} else if (amp_after(ack, p->beg_snd_nxt)) {
		p->beg_snd_nxt = t->snd_nxt;
		if (p->cnt_rtt <= 2)
			amp_reno_cong_avoid(t, acked);
		else
			amp_wvegas_round(c, p, t, acked);
		p->cnt_rtt = 0;
		p->sum_rtt = 0;
		p->min_rtt = 0x7fffffff;
	} else if (t->cwnd < t->ssthresh) {
		amp_slow_start(t, acked);
	}
	amp_publish(c, p, t);
}

/* --- the callbacks, by algorithm: c is the connection's entry (NULL for
 * a plain TCP socket or a subflow that could not be coupled), p the
 * socket's own state, t its view --- */

AMP_INLINE void amp_init(__u32 algo, struct amp_priv *p, const struct amp_tcp *t)
{
	p->credit = 0;
	p->loss_prev = 0;
	p->loss_mark = t->bytes_acked;
	p->ca_state = AMP_CA_OPEN;
	if (algo == AMP_WVEGAS)
		amp_vegas_init(p, t);
}

AMP_INLINE void amp_cong_avoid(__u32 algo, struct amp_conn *c, struct amp_priv *p, struct amp_tcp *t,
			       __u32 ack, __u32 acked)
{
	if (algo == AMP_WVEGAS) {
		if (p->mptcp)
			amp_wvegas_cong_avoid(c, p, t, ack, acked);
		else
			amp_vegas_cong_avoid(p, t, ack, acked);
	} else if (algo == AMP_RENO) {
		amp_reno_cong_avoid(t, acked);
	} else {
		amp_coupled_cong_avoid(algo, c, p, t, acked);
	}
}

AMP_INLINE __u32 amp_ssthresh(__u32 algo, struct amp_conn *c, struct amp_priv *p, struct amp_tcp *t)
{
	if (algo == AMP_RENO || algo == AMP_WVEGAS) {
		if (amp_slot_of(c, p->slot)) {
			amp_publish(c, p, t);
			amp_slot_of(c, p->slot)->cwnd = amp_reno_ssthresh(t);
		}
		return amp_reno_ssthresh(t);
	}
	return amp_coupled_ssthresh(algo, c, p, t);
}

AMP_INLINE void amp_set_state(__u32 algo, struct amp_conn *c, struct amp_priv *p, struct amp_tcp *t, __u8 state)
{
	p->ca_state = state;
	if (algo == AMP_WVEGAS) {
		if (state == AMP_CA_OPEN)
			amp_vegas_enable(p, t);
		else
			p->vegas_on = 0;
	}
	if (state == AMP_CA_LOSS && amp_slot_of(c, p->slot)) {
		/* A timeout: the window restarts from one packet. */
		amp_publish(c, p, t);
		amp_slot_of(c, p->slot)->cwnd = 1;
	}
}

AMP_INLINE void amp_pkts_acked(__u32 algo, struct amp_priv *p, __s32 rtt_us)
{
	if (algo == AMP_WVEGAS)
		amp_vegas_sample(p, rtt_us);
}

AMP_INLINE void amp_cwnd_event(__u32 algo, struct amp_priv *p, const struct amp_tcp *t, __u32 ev)
{
	if (algo == AMP_WVEGAS && (ev == AMP_EV_CWND_RESTART || ev == AMP_EV_TX_START))
		amp_vegas_init(p, t);
}

/* --- a connection's slots --- */

/* amp_find is the slot of subflow id, -1 if it has none. */
AMP_INLINE int amp_find(const struct amp_conn *c, __u32 id)
{
	int i;

	for (i = 0; i < AMP_SLOTS; i++)
		if (c->slots[i].id == id)
			return i;
	return -1;
}

/* amp_claim returns the slot of subflow id (never 0), taking a free one
 * if it has none; -1 if none is free. A subflow whose own state was reset
 * finds its slot again by its id, which is unique in its connection. */
AMP_INLINE int amp_claim(struct amp_conn *c, __u32 id)
{
	int i = amp_find(c, id);

	if (i >= 0)
		return i;
	for (i = 0; i < AMP_SLOTS; i++) {
		if (__sync_val_compare_and_swap(&c->slots[i].id, 0, id) == 0) {
			__sync_fetch_and_add(&c->refs, 1);
			return i;
		}
	}
	return -1;
}

/* amp_leave frees slot i; true when it was the connection's last. */
AMP_INLINE int amp_leave(struct amp_conn *c, __u32 i)
{
	struct amp_slot *s = amp_slot_of(c, i);

	if (!s)
		return 0;
	s->cwnd = 0;
	s->rtt_us = 0;
	s->alpha = 0;
	s->acked = 0;
	s->loss_prev = 0;
	s->loss_mark = 0;
	s->rate = 0;
	s->seen = 0;
	s->id = 0;
	return __sync_fetch_and_add(&c->refs, -1) == 1;
}
