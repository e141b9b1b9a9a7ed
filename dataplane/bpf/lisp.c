// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The LISP data plane (RFC 9300) on tc ingress:
 *
 *   itr       on the EID interfaces: look the destination EID up in the
 *             map-cache, pick a path, clamp the MSS of SYNs, encapsulate,
 *             and send the packet out of the RLOC interface towards the
 *             path's first hop.
 *   underlay  on the RLOC interfaces: take UDP 4341 packets addressed to
 *             one of our RLOCs; re-encapsulate towards the next hop when
 *             we are an RTR on the packet's ELP, else decapsulate and hand
 *             the inner packet to the kernel (ETR).
 *
 * Everything a packet needs is decided before bpf_skb_adjust_room: after
 * it the packet carries our RLOC and must be redirected. */

#include "common.h"
#include "maps.h"
#include "parse.h"
#include "paths.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Flags of bpf_skb_adjust_room that set skb->protocol to the inner
 * family on decapsulation (Linux 6.3), newer than Debian 12's headers. */
#ifndef BPF_F_ADJ_ROOM_DECAP_L3_IPV4
#define BPF_F_ADJ_ROOM_DECAP_L3_IPV4 (1ULL << 7)
#define BPF_F_ADJ_ROOM_DECAP_L3_IPV6 (1ULL << 8)
#endif

#define LISP_N 0x80
#define LISP_L 0x40
#define LISP_E 0x20
#define LISP_V 0x10
#define LISP_I 0x08
#define LISP_P 0x04 /* LISP-GPE (RFC 9305): the next protocol is in the header */
#define LISP_K 0x03

/* LISP-GPE's next protocols that an xTR delivers. */
#define GPE_IPV4 1
#define GPE_IPV6 2

struct lisphdr {
	__u8 flags;
	__u8 nonce[3]; /* with P: 16 bits, then the next protocol */
	__u32 word2;   /* instance ID << 8 | low byte, network order */
};

static __always_inline __u8 gpe_next_protocol(__u8 family)
{
	return family == AF_INET ? GPE_IPV4 : GPE_IPV6;
}

static __always_inline __u32 eth_proto_of(__u8 family)
{
	return family == AF_INET ? bpf_htons(ETH_P_IP) : bpf_htons(ETH_P_IPV6);
}

static __always_inline struct mc_entry *lookup(__u32 iid, const struct pkt *p)
{
	if (p->family == AF_INET) {
		struct mc_key4 k = {.prefixlen = 64, .iid = bpf_htonl(iid), .addr = p->dst.a[0]};
		return bpf_map_lookup_elem(&mapcache4, &k);
	}
	struct mc_key6 k = {.prefixlen = 160, .iid = bpf_htonl(iid)};
	__builtin_memcpy(k.addr, &p->dst, 16);
	return bpf_map_lookup_elem(&mapcache6, &k);
}

/* report_miss tells the Go side about an EID without an entry, at most
 * once per miss interval. */
static __always_inline void report_miss(__u32 iid, const struct pkt *p)
{
	struct miss m = {.iid = iid, .family = p->family, .eid = p->dst};
	__u64 now = bpf_ktime_get_ns();
	__u64 *last = bpf_map_lookup_elem(&miss_seen, &m);
	if (last && now - *last < cfg_miss_interval_ns)
		return;
	bpf_map_update_elem(&miss_seen, &m, &now, BPF_ANY);
	if (bpf_ringbuf_output(&misses, &m, sizeof(m), 0))
		count(C_ITR_MISS_LOST);
	else
		count(C_ITR_MISS_REPORTED);
}

/* route finds the interface and next hop towards an RLOC, as the kernel
 * would forward a packet that came in on skb's interface. */
static __always_inline long route(struct __sk_buff *skb, __u8 family, const struct addr *dst,
				  struct bpf_fib_lookup *fib)
{
	__builtin_memset(fib, 0, sizeof(*fib));
	fib->family = family;
	fib->ifindex = skb->ifindex;
	if (family == AF_INET)
		fib->ipv4_dst = dst->a[0];
	else
		__builtin_memcpy(fib->ipv6_dst, dst, 16);
	return bpf_fib_lookup(skb, fib, sizeof(*fib), 0);
}

static __always_inline __u16 csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

/* ip_csum is the checksum of an IPv4 header without options whose check
 * field is zero: summed here, which costs less than bpf_csum_diff's call. */
static __always_inline __u16 ip_csum(const struct iphdr *ip)
{
	const __u32 *w = (const __u32 *)ip;
	__u64 sum = (__u64)w[0] + w[1] + w[2] + w[3] + w[4];
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffffffff) + (sum >> 32);
	return csum_fold(sum);
}

/* The TTL, protocol and header checksum of an IPv4 header: TTL and
 * protocol share the 16-bit word of the checksum. */
struct ttl4 {
	__u8 ttl;
	__u8 proto;
	__u16 check;
};

/* put_ttl4 sets the TTL of h, the checksum updated as RFC 1624 says. */
static __always_inline void put_ttl4(struct ttl4 *h, __u8 ttl)
{
	__u16 old = bpf_htons((__u16)h->ttl << 8 | h->proto);
	__u16 new = bpf_htons((__u16)ttl << 8 | h->proto);
	h->ttl = ttl;
	h->check = csum_fold((__u16)~h->check + (__u16)~old + new);
}

/* set_ttl writes ttl into the IP header at off (TTL, or hop limit). */
static __always_inline void set_ttl(struct __sk_buff *skb, __u32 off, __u8 family, __u8 ttl)
{
	if (family == AF_INET6) {
		bpf_skb_store_bytes(skb, off + offsetof(struct ipv6hdr, hop_limit), &ttl, 1, 0);
		return;
	}
	struct ttl4 h;
	off += offsetof(struct iphdr, ttl);
	if (load(skb, off, &h, sizeof(h)))
		return;
	put_ttl4(&h, ttl);
	bpf_skb_store_bytes(skb, off, &h, sizeof(h), 0);
}

/* The outer headers. Their fields fall on natural alignments, so the
 * structs have no padding. */
struct outer4 {
	struct iphdr ip;
	struct udphdr udp;
	struct lisphdr lisp;
};
_Static_assert(sizeof(struct outer4) == OVERHEAD4, "outer4 has padding");

struct outer6 {
	struct ipv6hdr ip;
	struct udphdr udp;
	struct lisphdr lisp;
};
_Static_assert(sizeof(struct outer6) == OVERHEAD6, "outer6 has padding");

/* The headers of an encapsulated frame from the Ethernet header on,
 * written with one store; pad aligns the IP header. */
struct frame4 {
	__u16 pad;
	struct ethhdr eth;
	struct outer4 o;
};
_Static_assert(sizeof(struct frame4) == 2 + ETH_HLEN + OVERHEAD4, "frame4 has padding");

struct frame6 {
	__u16 pad;
	struct ethhdr eth;
	struct outer6 o;
};
_Static_assert(sizeof(struct frame6) == 2 + ETH_HLEN + OVERHEAD6, "frame6 has padding");

/* The inner IP header up to its TTL (IPv6: hop limit) and, for IPv4, its
 * checksum: the ITR, a hop, writes it with the outer headers. */
union inner_start {
	struct {
		__u8 head[8];
		struct ttl4 t;
	} v4;
	struct {
		__u8 head[7];
		__u8 hop_limit;
	} v6;
};

struct itr_frame4 {
	struct frame4 f;
	union inner_start in;
};
_Static_assert(sizeof(struct itr_frame4) == sizeof(struct frame4) + 12, "itr_frame4 has padding");

struct itr_frame6 {
	struct frame6 f;
	union inner_start in;
};
_Static_assert(sizeof(struct itr_frame6) == sizeof(struct frame6) + 12, "itr_frame6 has padding");

/* transmit writes the headers at hdr (len bytes from the Ethernet header
 * on) and sends the packet out of the interface the route found, to its
 * next hop; when the neighbour is not resolved yet, the kernel resolves
 * it and writes the MAC addresses.
 *
 * A packet from a TCP or UDP socket of this machine (through a veth from
 * another namespace: a lab, a container) keeps its sender's socket through a
 * redirect, where the kernel's forwarding lets go of it (ip_rcv): its
 * TCP would count it until it left the last router on the machine and,
 * past its small-queue limit, stop sending for what only routers hold,
 * then send from whichever CPU frees it. The router sends a clone, which
 * has no socket, and drops the packet, which frees it here: tcx has no
 * verdict for a packet consumed (TC_ACT_STOLEN passes it on), so the
 * kernel's drop tracing sees these. What goes to a neighbour not yet
 * resolved (and by source-port-sum, to a gateway) keeps its socket:
 * bpf_redirect_neigh has no clone. */
static __always_inline int transmit(struct __sk_buff *skb, struct bpf_fib_lookup *fib, long rc, __u8 family,
				    struct ethhdr *hdr, const __u32 len)
{
	hdr->h_proto = eth_proto_of(family);
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH) {
		struct bpf_redir_neigh nh = {.nh_family = fib->family};
		if (fib->family == AF_INET)
			nh.ipv4_nh = fib->ipv4_dst;
		else
			__builtin_memcpy(nh.ipv6_nh, fib->ipv6_dst, 16);
		if (bpf_skb_store_bytes(skb, offsetof(struct ethhdr, h_proto), &hdr->h_proto,
					len - offsetof(struct ethhdr, h_proto), 0))
			return TC_ACT_SHOT;
		return bpf_redirect_neigh(fib->ifindex, &nh, sizeof(nh), 0);
	}
	__builtin_memcpy(hdr->h_dest, fib->dmac, ETH_ALEN);
	__builtin_memcpy(hdr->h_source, fib->smac, ETH_ALEN);
	if (bpf_skb_store_bytes(skb, 0, hdr, len, 0))
		return TC_ACT_SHOT;
	struct bpf_sock *sk = skb->sk;
	if (sk)
		sk = bpf_sk_fullsock(sk);
	if (sk && (sk->protocol == IPPROTO_TCP || sk->protocol == IPPROTO_UDP)) {
		/* A clone that fails is lost as a packet a full queue drops. */
		bpf_clone_redirect(skb, fib->ifindex, 0);
		return TC_ACT_SHOT;
	}
	return bpf_redirect(fib->ifindex, 0);
}

/* clamp_mss lowers the MSS option of a SYN so that a full segment still
 * fits the RLOC interface's MTU once encapsulated. The ITR has parsed the
 * options of SYNs into o. */
static __always_inline void clamp_mss(struct __sk_buff *skb, const struct pkt *p, struct tcpopts *o,
				      __u32 mtu, __u32 overhead)
{
	if (!cfg_clamp_mss || p->proto != IPPROTO_TCP || !(p->tcp_flags & TCP_SYN) || p->fragment || !o->mss)
		return;
	__u32 max = mtu - overhead - p->l3_len - sizeof(struct tcphdr);
	if (o->mss <= max || max > 0xffff)
		return;
	__u16 old = bpf_htons(o->mss), new = bpf_htons(max);
	__u32 off = p->l4_off + sizeof(struct tcphdr) + o->mss_off;
	if (bpf_skb_store_bytes(skb, off, &new, 2, 0))
		return;
	bpf_l4_csum_replace(skb, p->l4_off + offsetof(struct tcphdr, check), old, new, 2);
	o->mss = max;
	count(C_ITR_MSS_CLAMPED);
}

/* source_by_port_sum picks the ITR's own RLOC interface by [A-MPTCP]'s
 * port sum, (source port + destination port) mod the number of RLOC
 * interfaces (source-selection port-sum; the first FAST_EGRESS count): a
 * multihomed site spreads what it sends over its RLOCs, which routing by
 * the destination would not. It fills eg with what the interface sends
 * with, and fib with the interface and its gateway as the next hop for
 * transmit; 0 leaves the choice to the route. */
static __always_inline int source_by_port_sum(const struct pkt *p, __u8 family, struct bpf_fib_lookup *fib,
					      struct egress *eg)
{
	__u32 n = cfg_n_egress < FAST_EGRESS ? cfg_n_egress : FAST_EGRESS;
	if (!cfg_source_port_sum || n < 2)
		return 0;
	__u32 i = (bpf_ntohs(p->sport) + bpf_ntohs(p->dport)) % n;
	if (i >= FAST_EGRESS)
		return 0;
	*eg = cfg_egress[i].eg;
	if (family == AF_INET ? !(eg->has4 && eg->gw4) : !(eg->has6 && eg->has_gw6))
		return 0;
	__builtin_memset(fib, 0, sizeof(*fib));
	fib->family = family;
	fib->ifindex = cfg_egress[i].ifindex;
	if (family == AF_INET)
		fib->ipv4_dst = eg->gw4;
	else
		__builtin_memcpy(fib->ipv6_dst, &eg->gw6, 16);
	count(C_ITR_SOURCE_PORT_SUM);
	return 1;
}

/* Where the ITR sends a packet: the first hop of its path, and the path
 * ID for the data header (0: none); and the packet's flow_hash. */
struct target {
	struct addr dst;
	__u8 family;
	__u8 pid;
	__u8 gpe; /* the first hop accepts LISP-GPE */
	__u8 pad;
	__u32 hash;
};

/* encapsulate wraps the packet for its target and sends it. Global, so
 * that its stack frame is not added to the ITR's. */
__noinline int encapsulate(struct __sk_buff *skb, const struct pkt *p, struct tcpopts *o, const struct target *t)
{
	if (!p || !o || !t)
		return TC_ACT_SHOT;
	__u8 family = t->family, pid = t->pid;
	const struct addr *dst = &t->dst;
	struct bpf_fib_lookup fib;
	struct egress egress, *eg = &egress;
	long rc = BPF_FIB_LKUP_RET_NO_NEIGH; /* transmit resolves the gateway */
	if (!source_by_port_sum(p, family, &fib, eg)) {
		rc = route(skb, family, dst, &fib);
		if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH) {
			count(C_ITR_NO_ROUTE);
			return TC_ACT_SHOT;
		}
		if (egress_of(fib.ifindex, eg) || (family == AF_INET ? !eg->has4 : !eg->has6)) {
			count(C_ITR_NO_SOURCE);
			return TC_ACT_SHOT;
		}
	}
	__u32 overhead = family == AF_INET ? OVERHEAD4 : OVERHEAD6;
	clamp_mss(skb, p, o, eg->mtu, overhead);
	if (skb->gso_size == 0 && p->len + overhead > eg->mtu) {
		count(C_ITR_TOO_BIG);
		return TC_ACT_SHOT;
	}

	__u32 h = t->hash;
	struct lisphdr lh = {};
	if (t->gpe) {
		/* RFC 9305: the payload's protocol in place of a nonce, so that
		 * the packets of a flow have equal headers, which the
		 * receiver's kernel aggregates (GRO, docs/routers.md). */
		lh.flags = LISP_P;
		lh.nonce[2] = gpe_next_protocol(p->family);
		count(C_ITR_GPE);
	} else {
		__u32 nonce = bpf_get_prandom_u32();
		lh.flags = LISP_N;
		lh.nonce[0] = nonce >> 16;
		lh.nonce[1] = nonce >> 8;
		lh.nonce[2] = nonce;
	}
	if (cfg_iid)
		lh.flags |= LISP_I;
	lh.word2 = bpf_htonl((cfg_iid << 8) | pid);

	/* RFC 9300 §5.3: source port from a hash of the inner flow, for
	 * ECMP in the underlay. */
	__u16 sport = bpf_htons(0xc000 | (h & 0x3fff));
	__u64 flags = BPF_F_ADJ_ROOM_ENCAP_L4_UDP | BPF_F_ADJ_ROOM_FIXED_GSO;
	flags |= family == AF_INET ? BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 : BPF_F_ADJ_ROOM_ENCAP_L3_IPV6;
	if (bpf_skb_adjust_room(skb, overhead, BPF_ADJ_ROOM_MAC, flags)) {
		count(C_ITR_ENCAP_FAILED);
		return TC_ACT_SHOT;
	}
	/* The ITR is a hop: the inner TTL goes down by one, and the outer
	 * header starts with it (RFC 9300 §5.3), so that a loop through
	 * the overlay ends. The program left TTLs of 1 to the kernel. The
	 * inner header's start is written with the outer headers: one
	 * store costs less than two. */
	union inner_start in;
	if (load(skb, ETH_HLEN + overhead, &in, sizeof(in))) {
		count(C_ITR_ENCAP_FAILED);
		return TC_ACT_SHOT;
	}
	__u8 ttl = p->ttl - 1;
	__u32 in_short = 0; /* bytes of in not written */
	if (p->family == AF_INET) {
		put_ttl4(&in.v4.t, ttl);
	} else {
		in.v6.hop_limit = ttl;
		in_short = sizeof(in) - sizeof(in.v6);
	}
	__u32 len = skb->len - ETH_HLEN;
	if (family == AF_INET) {
		struct itr_frame4 fr = {.in = in};
		struct frame4 *fp = &fr.f;
		struct outer4 *o4 = &fp->o;
		o4->ip.version = 4;
		o4->ip.ihl = 5;
		o4->ip.tos = p->tos;
		o4->ip.tot_len = bpf_htons(len);
		o4->ip.frag_off = bpf_htons(IP_DF);
		o4->ip.ttl = ttl;
		o4->ip.protocol = IPPROTO_UDP;
		o4->ip.saddr = eg->src4;
		o4->ip.daddr = dst->a[0];
		o4->ip.check = ip_csum(&o4->ip);
		o4->udp.source = sport;
		o4->udp.dest = bpf_htons(LISP_DATA_PORT);
		o4->udp.len = bpf_htons(len - sizeof(struct iphdr));
		o4->lisp = lh;
		count(C_ITR_ENCAP);
		return transmit(skb, &fib, rc, family, &fp->eth, sizeof(fr) - 2 - in_short);
	}
	struct itr_frame6 fr = {.in = in};
	struct frame6 *fp = &fr.f;
	struct outer6 *o6 = &fp->o;
	o6->ip.version = 6;
	o6->ip.priority = p->tos >> 4;
	o6->ip.flow_lbl[0] = (p->tos << 4) | ((h >> 16) & 0x0f);
	o6->ip.flow_lbl[1] = h >> 8;
	o6->ip.flow_lbl[2] = h;
	o6->ip.payload_len = bpf_htons(len - sizeof(struct ipv6hdr));
	o6->ip.nexthdr = IPPROTO_UDP;
	o6->ip.hop_limit = ttl;
	__builtin_memcpy(&o6->ip.saddr, &eg->src6, 16);
	__builtin_memcpy(&o6->ip.daddr, dst, 16);
	o6->udp.source = sport;
	o6->udp.dest = bpf_htons(LISP_DATA_PORT);
	o6->udp.len = o6->ip.payload_len;
	/* A zero checksum, as RFC 6935 allows for tunnels. */
	o6->lisp = lh;
	count(C_ITR_ENCAP);
	return transmit(skb, &fib, rc, family, &fp->eth, sizeof(fr) - 2 - in_short);
}

/* link_scoped reports whether a destination is multicast, broadcast or
 * link-local: traffic of the site's link, never sent into the overlay. */
static __always_inline int link_scoped(const struct pkt *p)
{
	__u8 first = p->dst.a[0] & 0xff; /* the address's first byte */
	if (p->family == AF_INET)
		return first >= 224 || (p->dst.a[0] & 0xffff) == 0xfea9; /* 169.254/16 */
	__u8 second = (p->dst.a[0] >> 8) & 0xff;
	return first == 0xff || (first == 0xfe && (second & 0xc0) == 0x80);
}

/* hold hands a packet to lispd, which holds it until its mapping is
 * resolved and releases it through the hold device, whose ingress runs
 * the ITR again (miss: hold). */
static __always_inline int hold(void)
{
	count(C_ITR_HELD);
	return bpf_redirect(cfg_hold_ifindex, 0);
}

/* rtr_hold hands an encapsulated packet an RTR has no mapping for to
 * lispd, which holds it as the ITR's, and releases it through the RTR's
 * hold device, whose ingress runs the underlay program again. */
static __always_inline int rtr_hold(void)
{
	count(C_RTR_HELD);
	return bpf_redirect(cfg_hold_rtr_ifindex, 0);
}

SEC("tc")
int itr(struct __sk_buff *skb)
{
	struct pkt p = {};
	__u8 family = family_of(skb->protocol);
	if (!family || parse_ip(skb, ETH_HLEN, family, &p)) {
		count(C_ITR_NOT_IP);
		return TC_ACT_OK;
	}
	if (link_scoped(&p)) {
		count(C_ITR_LOCAL);
		return TC_ACT_OK;
	}

	/* What lispd releases from the hold device is never held again. */
	int released = cfg_hold_ifindex && skb->ifindex == cfg_hold_ifindex;
	struct mc_entry *e = lookup(cfg_iid, &p);
	if (!e) {
		if (!released)
			report_miss(cfg_iid, &p);
		if (cfg_miss_native && !released) {
			count(C_ITR_MISS_NATIVE);
			return TC_ACT_OK;
		}
		if (cfg_hold_ifindex && !released)
			return hold();
		count(C_ITR_MISS_DROP);
		return TC_ACT_SHOT;
	}
	__u8 action = e->action;
	if (action == ACT_HOLD) {
		if (!released)
			return hold();
		action = e->n_paths ? ACT_ENCAP : ACT_NATIVE;
	}
	if (released)
		count(C_ITR_RELEASED);
	switch (action) {
	case ACT_ENCAP:
		break;
	case ACT_NATIVE:
		count(C_ITR_NATIVE);
		return TC_ACT_OK;
	case ACT_SEND_MAP_REQUEST:
		report_miss(cfg_iid, &p);
		/* fall through */
	default:
		count(C_ITR_ACTION_DROP);
		return TC_ACT_SHOT;
	}
	/* A packet whose TTL would end here goes to the kernel, which drops
	 * it and sends the ICMP Time Exceeded that traceroute waits for:
	 * rewriting it into one here would keep its checksum offload state
	 * (see MTU in docs/routers.md). */
	if (p.ttl <= 1) {
		count(C_ITR_TTL_EXPIRED);
		return TC_ACT_OK;
	}

	struct tcpopts o = {};
	int i = NOT_A_SUBFLOW;
	if (tracks_subflow(&p)) {
		i = itr_subflow(skb, &p, e, &o);
		if (o.learn)
			learn_tokens(&o);
	}
	__u32 h = flow_hash(&p);
	if (i == NOT_A_SUBFLOW)
		i = select_stateless(e, &p, h);
	if (i < 0 || i >= MAX_PATHS) {
		count(C_ITR_NO_PATH);
		return TC_ACT_SHOT;
	}
	const struct path *pa = &e->paths[path_slot(i)];
	count_path(&itr_paths, i, p.len);
	if (cfg_clamp_mss && (p.tcp_flags & TCP_SYN) && p.proto == IPPROTO_TCP && !o.mss)
		parse_tcp_options(skb, &p, &o);
	struct target t = {.dst = pa->first, .family = pa->family, .gpe = pa->gpe & GPE_FIRST, .hash = h};
	if (!cfg_previous_hop && pa->n_hops > 1)
		t.pid = i + 1;
	return encapsulate(skb, &p, &o, &t);
}

/* hop_ttl is the outer TTL an RTR sends a packet on with: an RTR is an
 * ETR and an ITR in one (RFC 9300 §5.3), so the smaller of the outer and
 * the inner TTL, minus one for the hop; 0 when it ends here. The inner
 * header is left as it came: the last ETR copies the smaller outer TTL
 * into it. */
static __always_inline __u8 hop_ttl(__u8 outer, __u32 inner)
{
	__u8 ttl = inner < outer ? inner : outer;
	return ttl > 1 ? ttl - 1 : 0;
}

/* Where an RTR sends a packet on: the next hop of its path, the path's
 * index for the counters, and what the packet brings. */
struct onward {
	struct addr next;
	__u32 pid;
	__u32 len;	 /* of the outer packet */
	__u32 inner_ttl;
	__u8 inner_family;
	__u8 gpe;	 /* the next hop accepts LISP-GPE */
	__u8 pad[2];
};

/* hop_lisp writes the LISP header an RTR sends on: LISP-GPE to a next
 * hop that accepts it, else RFC 9300's, as RFC 9305 wants of a router
 * that has not said it takes LISP-GPE. The instance ID, the path ID and
 * the key ID stay as they came. */
static __always_inline void hop_lisp(struct lisphdr *lh, const struct onward *h)
{
	if (h->gpe) {
		count(C_RTR_GPE);
		lh->flags = (lh->flags & (LISP_L | LISP_I | LISP_K)) | LISP_P;
		lh->nonce[0] = lh->nonce[1] = 0;
		lh->nonce[2] = gpe_next_protocol(h->inner_family);
	} else if (lh->flags & LISP_P) {
		lh->flags &= ~(LISP_P | LISP_N | LISP_E | LISP_V);
		lh->nonce[0] = lh->nonce[1] = lh->nonce[2] = 0;
	}
}

/* reencapsulate rewrites the outer header in place to send the packet on
 * to the next hop of its ELP. */
__noinline int reencapsulate(struct __sk_buff *skb, __u32 family, const struct onward *h)
{
	if (!h)
		return TC_ACT_SHOT;
	const struct addr *next = &h->next;
	__u32 pid = h->pid, len = h->len, inner_ttl = h->inner_ttl;
	struct bpf_fib_lookup fib;
	long rc = route(skb, family, next, &fib);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH) {
		count(C_RTR_NO_ROUTE);
		return TC_ACT_SHOT;
	}
	struct egress egress, *eg = &egress;
	if (egress_of(fib.ifindex, eg) || (family == AF_INET ? !eg->has4 : !eg->has6)) {
		count(C_RTR_NO_ROUTE);
		return TC_ACT_SHOT;
	}
	if (family == AF_INET) {
		struct frame4 f;
		struct iphdr *ip = &f.o.ip;
		if (load(skb, ETH_HLEN, &f.o, sizeof(f.o)))
			return TC_ACT_SHOT;
		__u8 ttl = hop_ttl(ip->ttl, inner_ttl);
		if (!ttl) {
			count(C_RTR_TTL);
			return TC_ACT_SHOT;
		}
		ip->ttl = ttl;
		ip->saddr = eg->src4;
		ip->daddr = next->a[0];
		ip->check = 0;
		ip->check = ip_csum(ip);
		f.o.udp.check = 0;
		hop_lisp(&f.o.lisp, h);
		count(C_RTR_REENCAP);
		count_path(&rtr_paths, pid < MAX_PATHS ? pid : 0, len);
		return transmit(skb, &fib, rc, family, &f.eth, sizeof(f) - 2);
	}
	struct frame6 f;
	struct ipv6hdr *ip6 = &f.o.ip;
	if (load(skb, ETH_HLEN, &f.o, sizeof(f.o)))
		return TC_ACT_SHOT;
	__u8 ttl = hop_ttl(ip6->hop_limit, inner_ttl);
	if (!ttl) {
		count(C_RTR_TTL);
		return TC_ACT_SHOT;
	}
	ip6->hop_limit = ttl;
	__builtin_memcpy(&ip6->saddr, &eg->src6, 16);
	__builtin_memcpy(&ip6->daddr, next, 16);
	f.o.udp.check = 0;
	hop_lisp(&f.o.lisp, h);
	count(C_RTR_REENCAP);
	count_path(&rtr_paths, pid < MAX_PATHS ? pid : 0, len);
	return transmit(skb, &fib, rc, family, &f.eth, sizeof(f) - 2);
}

/* decapsulate strips the outer headers and hands the inner packet to the
 * kernel, which routes it to the site. */
__noinline int decapsulate(struct __sk_buff *skb, const struct pkt *outer, const struct pkt *in, __u32 overhead)
{
	if (!outer || !in)
		return TC_ACT_SHOT;

	__u64 flags = BPF_F_ADJ_ROOM_FIXED_GSO;
	if (in->family != outer->family)
		flags |= in->family == AF_INET ? BPF_F_ADJ_ROOM_DECAP_L3_IPV4 : BPF_F_ADJ_ROOM_DECAP_L3_IPV6;
	if (bpf_skb_adjust_room(skb, -(__s32)overhead, BPF_ADJ_ROOM_MAC, flags)) {
		count(C_ETR_DECAP_FAILED);
		return TC_ACT_SHOT;
	}
	if (in->family != outer->family) {
		__u16 proto = eth_proto_of(in->family);
		bpf_skb_store_bytes(skb, offsetof(struct ethhdr, h_proto), &proto, 2, 0);
	}
	/* RFC 9300 §5.3: a smaller outer TTL is copied to the inner header,
	 * so that the hops of the underlay count, and a TTL cannot grow
	 * through encapsulation. The kernel then forwards the packet, one
	 * hop more. */
	if (outer->ttl < in->ttl)
		set_ttl(skb, ETH_HLEN, in->family, outer->ttl);
	count(C_ETR_DECAP);
	return TC_ACT_OK;
}

/* Defined after what it uses. */
static __always_inline int xdp_decapsulated(struct __sk_buff *skb, __u8 family);

SEC("tc")
int underlay(struct __sk_buff *skb)
{
	struct pkt outer = {};
	__u8 family = family_of(skb->protocol);
	if (cfg_xdp && family && xdp_decapsulated(skb, family))
		return TC_ACT_OK;
	if (!family || parse_ip(skb, ETH_HLEN, family, &outer))
		return TC_ACT_OK;
	if (outer.proto != IPPROTO_UDP || outer.dport != bpf_htons(LISP_DATA_PORT))
		return TC_ACT_OK;
	if (!is_rloc(family, &outer.dst))
		return TC_ACT_OK; /* in transit through us */
	if (outer.fragment) {
		count(C_ETR_FRAGMENT);
		return TC_ACT_OK;
	}

	__u32 overhead = outer.l3_len + sizeof(struct udphdr) + LISP_HLEN;
	struct lisphdr lh;
	if (load(skb, outer.l4_off + sizeof(struct udphdr), &lh, sizeof(lh))) {
		count(C_ETR_MALFORMED);
		return TC_ACT_SHOT;
	}
	__u32 word2 = bpf_ntohl(lh.word2);
	__u32 iid = (lh.flags & LISP_I) ? word2 >> 8 : 0;
	__u32 pid = (lh.flags & LISP_L) ? 0 : word2 & 0xff;
	/* LISP-GPE names its payload: only IP has a place behind an xTR. */
	__u8 next = lh.nonce[2];
	if ((lh.flags & LISP_P) && next != GPE_IPV4 && next != GPE_IPV6) {
		count(C_ETR_NOT_IP);
		return TC_ACT_SHOT;
	}

	__u8 v;
	__u32 inner_off = ETH_HLEN + overhead;
	if (load(skb, inner_off, &v, 1)) {
		count(C_ETR_MALFORMED);
		return TC_ACT_SHOT;
	}
	struct pkt in = {};
	__u8 in_family = (v >> 4) == 4 ? AF_INET : (v >> 4) == 6 ? AF_INET6 : 0;
	if (in_family && (lh.flags & LISP_P) && next != gpe_next_protocol(in_family))
		in_family = 0; /* the header and the packet disagree */
	if (!in_family || parse_ip(skb, inner_off, in_family, &in)) {
		count(C_ETR_MALFORMED);
		return TC_ACT_SHOT;
	}

	/* Only an RTR sends packets on, so only an RTR looks them up: an ETR
	 * delivers what is addressed to it. */
	if (cfg_rtr) {
		/* What lispd releases from the RTR's hold device is never
		 * held again. */
		int released = cfg_hold_rtr_ifindex && skb->ifindex == cfg_hold_rtr_ifindex;
		struct mc_entry *e = lookup(iid, &in);
		if (!e) {
			/* An RTR resolves the EIDs it carries traffic for. */
			if (!released)
				report_miss(iid, &in);
			count(C_RTR_MISS);
			if (cfg_hold_rtr_ifindex && !released)
				return rtr_hold();
			return TC_ACT_SHOT;
		}
		int i = onward(e, pid, &outer.src, 0);
		if (i >= 0 && e->action == ACT_HOLD && !released)
			return rtr_hold();
		if (released)
			count(C_RTR_RELEASED);
		if (i >= 0 && i < MAX_PATHS) {
			const struct path *pa = &e->paths[path_slot(i)];
			if (!(pa->next.a[0] | pa->next.a[1] | pa->next.a[2] | pa->next.a[3])) {
				count(C_RTR_UNRESOLVED);
				return TC_ACT_SHOT;
			}
			if (pa->family != family) {
				count(C_RTR_FAMILY_CHANGE);
				return TC_ACT_SHOT;
			}
			struct onward h = {.next = pa->next, .pid = pid ? pid - 1 : i, .len = outer.len, .inner_ttl = in.ttl,
					   .inner_family = in.family, .gpe = pa->gpe & GPE_NEXT};
			return reencapsulate(skb, family, &h);
		}
	}
	if (tracks_subflow(&in)) {
		struct tcpopts o = {};
		etr_subflow(skb, &in, iid, &o);
		if (o.learn)
			learn_tokens(&o);
	}
	return decapsulate(skb, &outer, &in, overhead);
}

#include "xdp.h"

/* gro_sink is the ingress of lispd's GRO device, whose UDP socket on
 * port 4341 gives LISP-GPE the kernel's GRO (docs/routers.md). What that
 * socket receives itself is what no RLOC interface's program took: the
 * kernel would decapsulate it and deliver or route the inner packet,
 * around the ETR. Everything is dropped, and counted. */
SEC("tc")
int gro_sink(struct __sk_buff *skb)
{
	count(C_GRO_DROPPED);
	return TC_ACT_SHOT;
}

/* xdp_decapsulated follows the MPTCP handshakes of what underlay_xdp
 * decapsulated, as decapsulation in tc does, once GRO has aggregated it;
 * it returns 0 for every other packet. */
static __always_inline int xdp_decapsulated(struct __sk_buff *skb, __u8 family)
{
	struct xdp_note *note = xdp_note_of(skb);
	if (!note)
		return 0;
	struct pkt in = {};
	if (parse_ip(skb, ETH_HLEN, family, &in) == 0 && tracks_subflow(&in)) {
		struct tcpopts o = {};
		etr_subflow(skb, &in, note->iid, &o);
		if (o.learn)
			learn_tokens(&o);
	}
	return 1;
}
