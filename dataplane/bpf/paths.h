/* Which path of a map-cache entry a packet takes: MPTCP subflows keep the
 * path they were bound to, distinct for each subflow of a connection;
 * every other packet gets one of the best paths that are up, by a hash of
 * its flow (weighted) or by the sum of its ports ([A-MPTCP]).
 *
 * The functions that loop over paths are global (not static): the
 * verifier checks each once on its own, instead of once for every branch
 * of its callers, which keeps the programs within its limits. */
#pragma once

#include "maps.h"
#include "parse.h"
#include "sha256.h"

static __always_inline int usable(const struct path *pa)
{
	return pa->up && pa->priority < 255;
}

static __always_inline __u32 mix32(__u32 h)
{
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

/* flow_hash is the same for every packet of a flow. */
static __always_inline __u32 flow_hash(const struct pkt *p)
{
	__u32 h = p->proto;
#pragma unroll
	for (int i = 0; i < 4; i++)
		h = mix32(h ^ p->src.a[i] ^ (p->dst.a[i] * 0x9e3779b1));
	return mix32(h ^ ((__u32)p->sport << 16 | p->dport));
}

/* select_stateless picks a path among the usable ones of the best
 * (lowest) priority for a packet whose flow_hash is h, or returns -1
 * when none is up. */
__noinline int select_stateless(const struct mc_entry *e, const struct pkt *p, __u32 h)
{
	if (!e || !p)
		return -1;
	__u32 n_paths = e->n_paths < MAX_PATHS ? e->n_paths : MAX_PATHS;
	__u32 best = 255, n = 0, weights = 0;
	for (__u32 i = 0; i < n_paths && i < MAX_PATHS; i++) {
		const struct path *pa = &e->paths[i];
		if (usable(pa) && pa->priority < best)
			best = pa->priority;
	}
	if (best == 255)
		return -1;
	for (__u32 i = 0; i < n_paths && i < MAX_PATHS; i++) {
		const struct path *pa = &e->paths[i];
		if (usable(pa) && pa->priority == best) {
			n++;
			weights += pa->weight;
		}
	}
	if (n == 0)
		return -1;

	__u32 pick;
	int by_weight = 0;
	if (cfg_port_sum) {
		pick = (bpf_ntohs(p->sport) + bpf_ntohs(p->dport)) % n;
	} else if (weights == 0) {
		pick = h % n;
	} else {
		pick = h % weights;
		by_weight = 1;
	}
	for (__u32 i = 0; i < n_paths && i < MAX_PATHS; i++) {
		const struct path *pa = &e->paths[i];
		if (!usable(pa) || pa->priority != best)
			continue;
		__u32 share = by_weight ? pa->weight : 1;
		if (pick < share)
			return i;
		pick -= share;
	}
	return -1;
}

/* bind_path gives a new subflow of connection c the best path for it:
 * the one used by the fewest subflows of the connection, then of the
 * lowest priority, then of the highest weight, then the first. It counts
 * the subflow on that path and returns its index, or -1. */
__noinline int bind_path(const struct mc_entry *e, struct conn *c)
{
	if (!e || !c)
		return -1;
	__u32 n_paths = e->n_paths < MAX_PATHS ? e->n_paths : MAX_PATHS;
	int best = -1;
	__u32 best_used = 0, best_prio = 0, best_weight = 0;
	for (__u32 i = 0; i < n_paths && i < MAX_PATHS; i++) {
		const struct path *pa = &e->paths[i];
		if (!usable(pa))
			continue;
		__u32 used = c->on_path[i];
		if (best >= 0) {
			if (used > best_used)
				continue;
			if (used == best_used && pa->priority > best_prio)
				continue;
			if (used == best_used && pa->priority == best_prio && pa->weight <= best_weight)
				continue;
		}
		best = i;
		best_used = used;
		best_prio = pa->priority;
		best_weight = pa->weight;
	}
	if (best >= 0 && best < MAX_PATHS)
		__sync_fetch_and_add(&c->on_path[best], 1);
	return best;
}

static __always_inline void release(__u64 conn, __u8 path)
{
	if (path >= MAX_PATHS)
		return;
	struct conn *c = bpf_map_lookup_elem(&conns, &conn);
	if (c && c->on_path[path & (MAX_PATHS - 1)] > 0)
		__sync_fetch_and_add(&c->on_path[path & (MAX_PATHS - 1)], -1);
}

static __always_inline __u64 new_conn(void)
{
	__u64 id = ((__u64)bpf_get_prandom_u32() << 32) | bpf_get_prandom_u32();
	struct conn c = {.created_ns = bpf_ktime_get_coarse_ns()};
	bpf_map_update_elem(&conns, &id, &c, BPF_ANY);
	return id;
}

/* learn_tokens files both tokens of an MP_CAPABLE carrying both keys under
 * their connection, once per connection. The subflow tracking only marks
 * the options for it, so that the hashing's stack frame is not stacked on
 * the tracking's: the programs call it at the top. */
__noinline int learn_tokens(struct tcpopts *o)
{
	if (!o || !o->learn)
		return 0;
	__u64 id = o->conn;
	struct conn *c = bpf_map_lookup_elem(&conns, &id);
	if (!c || c->has_tokens)
		return 0;
	c->has_tokens = 1;
	__u32 t1 = mptcp_token(&o->key1);
	__u32 t2 = mptcp_token(&o->key2);
	bpf_map_update_elem(&tokens, &t1, &id, BPF_ANY);
	bpf_map_update_elem(&tokens, &t2, &id, BPF_ANY);
	count(C_SUBFLOW_TOKENS);
	return 0;
}

static __always_inline void flow_key_of(struct flow_key *k, const struct pkt *p, __u32 iid, int outbound)
{
	k->iid = iid;
	k->family = p->family;
	if (outbound) {
		k->local = p->src;
		k->remote = p->dst;
		k->lport = p->sport;
		k->rport = p->dport;
	} else {
		k->local = p->dst;
		k->remote = p->src;
		k->lport = p->dport;
		k->rport = p->sport;
	}
}

/* subflow_hint is the slot of subflow_hints for a packet's flow, the
 * same in both directions. */
static __always_inline __u32 *subflow_hint(const struct pkt *p, __u32 iid, int outbound)
{
	const struct addr *local = outbound ? &p->src : &p->dst;
	const struct addr *remote = outbound ? &p->dst : &p->src;
	__u32 ports = outbound ? (__u32)p->sport << 16 | p->dport : (__u32)p->dport << 16 | p->sport;
	__u32 h = iid;
#pragma unroll
	for (int i = 0; i < 4; i++)
		h ^= local->a[i] + remote->a[i] * 0x9e3779b1;
	__u32 slot = mix32(mix32(h) ^ ports) & (SUBFLOW_HINTS - 1);
	return bpf_map_lookup_elem(&subflow_hints, &slot);
}

/* tracks_subflow reports whether a packet may be of an MPTCP subflow:
 * TCP with its ports, when subflows are bound. */
static __always_inline int tracks_subflow(const struct pkt *p)
{
	return cfg_bind_subflows && p->proto == IPPROTO_TCP && !p->fragment && p->tcp_hlen != 0;
}

/* track_subflow follows the MPTCP handshake of a TCP packet: a SYN with
 * MP_CAPABLE starts a connection, a SYN with MP_JOIN adds a subflow to
 * the connection its token names, an MP_CAPABLE with both keys teaches
 * the connection's tokens, FIN and RST end subflows. outbound is 1 at the
 * ITR (the local host sends), 0 at the ETR. It returns the subflow, or
 * NULL when the packet is not of an MPTCP subflow. Packets whose hint
 * says so are not looked up (bpf/maps.h). */
static __always_inline struct subflow *track_subflow(struct __sk_buff *skb, const struct pkt *p, __u32 iid,
						     int outbound, struct tcpopts *o)
{
	if (!tracks_subflow(p))
		return NULL;
	__u8 flags = p->tcp_flags;
	__u32 *hint = subflow_hint(p, iid, outbound);
	if (!hint)
		return NULL;
	__u32 epoch = subflow_epoch;
	/* A stale hint: no subflow has this flow, and only a SYN can start
	 * one. */
	if ((__s32)(epoch - *hint) > SUBFLOW_HINT_EPOCHS && (flags & (TCP_SYN | TCP_ACK)) != TCP_SYN)
		return NULL;

	struct flow_key k = {};
	flow_key_of(&k, p, iid, outbound);
	struct subflow *sf = bpf_map_lookup_elem(&subflows, &k);

	if (sf) {
		if (*hint != epoch)
			*hint = epoch;
		/* The coarse clock (a tick behind) is enough for idle
		 * timeouts and reads no clock source; writing only when it
		 * moved spares the cache line the other direction reads. */
		__u64 now = bpf_ktime_get_coarse_ns();
		if (sf->last_ns != now)
			sf->last_ns = now;
		if (flags & TCP_RST) {
			count(C_SUBFLOW_RESET);
			release(sf->conn, sf->path);
			bpf_map_delete_elem(&subflows, &k);
			return NULL;
		}
		if ((flags & TCP_FIN) && !(sf->flags & SF_CLOSING)) {
			sf->flags |= SF_CLOSING;
			count(C_SUBFLOW_FIN);
		}
		/* The keys come on the first packets after the SYNs of the
		 * subflow that opened the connection (MP_CAPABLE). */
		if (!(flags & TCP_SYN) && (sf->flags & SF_LEARN)) {
			__u64 id = sf->conn;
			struct conn *c = bpf_map_lookup_elem(&conns, &id);
			if (c && c->has_tokens)
				sf->flags &= ~SF_LEARN;
			else if (c && parse_tcp_options(skb, p, o) == 0 && o->keys) {
				o->learn = 1;
				o->conn = id;
			}
		}
		return sf;
	}

	if ((flags & (TCP_SYN | TCP_ACK)) != TCP_SYN)
		return NULL;
	if (parse_tcp_options(skb, p, o) < 0 || o->mptcp == 0)
		return NULL;

	struct subflow n = {.last_ns = bpf_ktime_get_coarse_ns(), .path = NO_PATH};
	if (outbound)
		n.flags = SF_INITIATOR;
	if (o->mptcp == MPTCP_MP_CAPABLE + 1) {
		n.flags |= SF_LEARN;
		n.conn = new_conn();
		count(C_SUBFLOW_NEW);
	} else if (o->mptcp == MPTCP_MP_JOIN + 1) {
		__u32 token;
		__builtin_memcpy(&token, o->token, 4);
		__u64 *conn = bpf_map_lookup_elem(&tokens, &token);
		if (conn) {
			n.conn = *conn;
			count(C_SUBFLOW_JOIN);
		} else {
			n.conn = new_conn();
			count(C_SUBFLOW_JOIN_UNKNOWN);
		}
	} else {
		return NULL;
	}
	bpf_map_update_elem(&subflows, &k, &n, BPF_ANY);
	*hint = epoch;
	return bpf_map_lookup_elem(&subflows, &k);
}

#define NOT_A_SUBFLOW -2

/* ask_path reports a subflow just bound for the control plane to ask the
 * destination's ETR for its path (stateful binding, [LISP-TE] §IV.A).
 * Its packets go on the path bound meanwhile: the SYN is not held. */
__noinline int ask_path(const struct pkt *p, struct subflow *sf)
{
	if (!p || !sf)
		return 0;
	struct subflow_event ev = {.conn = sf->conn, .path = sf->path, .flags = sf->flags};
	flow_key_of(&ev.key, p, cfg_iid, 1);
	if (bpf_ringbuf_output(&subflow_events, &ev, sizeof(ev), 0)) {
		count(C_SUBFLOW_ASK_LOST);
		return 0;
	}
	sf->flags |= SF_ASKED;
	count(C_SUBFLOW_ASKED);
	return 0;
}

/* take_pin moves a subflow whose path was asked for to the path the
 * control plane pinned for it, once it has one: from this packet on, if
 * that path is usable. */
__noinline int take_pin(const struct pkt *p, const struct mc_entry *e, struct subflow *sf)
{
	if (!p || !e || !sf)
		return 0;
	struct flow_key k = {};
	flow_key_of(&k, p, cfg_iid, 1);
	__u32 *pin = bpf_map_lookup_elem(&subflow_pins, &k);
	if (!pin)
		return 0;
	__u32 path = *pin;
	bpf_map_delete_elem(&subflow_pins, &k);
	sf->flags &= ~SF_ASKED;
	__u32 n_paths = e->n_paths < MAX_PATHS ? e->n_paths : MAX_PATHS;
	if (path >= n_paths || !usable(&e->paths[path_slot(path)])) {
		count(C_SUBFLOW_PIN_REFUSED);
		return 0;
	}
	__u8 cur = sf->path;
	if (cur != path) {
		release(sf->conn, cur);
		__u64 id = sf->conn;
		struct conn *c = bpf_map_lookup_elem(&conns, &id);
		if (c)
			__sync_fetch_and_add(&c->on_path[path_slot(path)], 1);
		sf->path = path;
	}
	sf->flags |= SF_PINNED;
	count(C_SUBFLOW_PINNED);
	return 0;
}

/* itr_subflow returns the path of an outbound packet of an MPTCP subflow,
 * binding the subflow on its first packet out and again when its path
 * goes down: -1 when no path is usable, NOT_A_SUBFLOW for packets that
 * are not of a subflow. */
__noinline int itr_subflow(struct __sk_buff *skb, const struct pkt *p, const struct mc_entry *e,
			   struct tcpopts *o)
{
	if (!p || !e || !o)
		return -1;
	struct subflow *sf = track_subflow(skb, p, cfg_iid, 1, o);
	if (!sf)
		return NOT_A_SUBFLOW;
	if (cfg_stateful && (sf->flags & SF_ASKED))
		take_pin(p, e, sf);
	__u8 cur = sf->path;
	if (cur < MAX_PATHS && cur < e->n_paths && usable(&e->paths[cur]))
		goto out;

	__u64 id = sf->conn;
	struct conn *c = bpf_map_lookup_elem(&conns, &id);
	if (!c) {
		/* Evicted: the subflow starts a connection of its own. */
		id = new_conn();
		sf->conn = id;
		c = bpf_map_lookup_elem(&conns, &id);
		if (!c)
			return -1;
	} else if (cur < MAX_PATHS) {
		release(id, cur);
		count(C_SUBFLOW_REBOUND);
	}
	int i = bind_path(e, c);
	if (i < 0 || i >= MAX_PATHS)
		return -1;
	__u8 first = cur == NO_PATH;
	sf->path = i;
	sf->flags &= ~SF_PINNED;
	cur = i;
	count(C_SUBFLOW_BOUND);
	if (cfg_stateful && first)
		ask_path(p, sf);
out:
	__sync_fetch_and_add(&sf->packets, 1);
	__sync_fetch_and_add(&sf->bytes, p->len);
	return cur;
}

/* etr_subflow follows the handshake of subflows the remote host opens, so
 * that the ITR binds our side of them. */
__noinline int etr_subflow(struct __sk_buff *skb, const struct pkt *p, __u32 iid, struct tcpopts *o)
{
	if (!p || !o)
		return 0;
	track_subflow(skb, p, iid, 0, o);
	return 0;
}

/* elp_of finds the path of entry e a packet follows through us: the one
 * its path ID names, else the one whose hop before us sent it, else the
 * first one we are the first hop of. It returns -1 when we are on none.
 * quiet leaves the ambiguity uncounted, for a look that tc repeats. */
__noinline int elp_of(const struct mc_entry *e, __u32 pid, const struct addr *from, __u32 quiet)
{
	if (!e || !from)
		return -1;
	__u32 n_paths = e->n_paths < MAX_PATHS ? e->n_paths : MAX_PATHS;
	if (pid > 0 && pid <= n_paths) {
		__u32 i = pid - 1;
		if (i < MAX_PATHS && e->paths[i].self != NO_SELF)
			return i;
	}
	int first = -1, firsts = 0;
	for (__u32 i = 0; i < n_paths && i < MAX_PATHS; i++) {
		const struct path *pa = &e->paths[i];
		if (pa->self == NO_SELF)
			continue;
		if (pa->self > 0 && pa->prev.a[0] == from->a[0] && pa->prev.a[1] == from->a[1] &&
		    pa->prev.a[2] == from->a[2] && pa->prev.a[3] == from->a[3])
			return i;
		if (pa->self == 0) {
			if (first < 0)
				first = i;
			firsts++;
		}
	}
	if (firsts > 1 && !quiet)
		count(C_RTR_AMBIGUOUS);
	return first;
}

/* onward returns the index of the path of entry e on which an RTR sends
 * a packet on (we are on it, and not its last hop), or -1. An entry lispd
 * is releasing held packets through (ACT_HOLD) has its paths. */
static __always_inline int onward(const struct mc_entry *e, __u32 pid, const struct addr *from, __u32 quiet)
{
	if (e->action != ACT_ENCAP && e->action != ACT_HOLD)
		return -1;
	int i = elp_of(e, pid, from, quiet);
	if (i < 0 || i >= MAX_PATHS)
		return -1;
	const struct path *pa = &e->paths[path_slot(i)];
	return pa->self + 1 < pa->n_hops ? i : -1;
}
