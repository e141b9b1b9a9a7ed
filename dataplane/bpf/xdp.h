/* The ETR in XDP, on the RLOC interfaces named in xdp-interfaces:
 *
 *   underlay_xdp  decapsulates the LISP packets addressed to one of our
 *                 RLOCs in the driver, ahead of GRO, so that the inner
 *                 TCP is aggregated as a router aggregates what it
 *                 forwards: the kernel has no GRO for UDP 4341, and
 *                 without this every MTU-sized packet crosses the stack
 *                 alone (docs/routers.md, Performance).
 *
 * It takes only the common case, and leaves everything else to the tc
 * program, untouched: outer IPv4 headers with options, fragments,
 * malformed packets, and the packets an RTR sends on (their outer header
 * is rewritten in tc). What it decapsulates reaches the tc program with
 * a note in the packet's metadata, which GRO keeps (it merges only
 * packets of equal metadata), so that tc follows the MPTCP handshakes as
 * it does for what it decapsulates itself. Included at the end of
 * lisp.c: it shares the programs' maps and helpers. */
#pragma once

/* The note in front of a frame that underlay_xdp decapsulated. */
struct xdp_note {
	__u32 magic;
	__u32 iid; /* host order */
};
#define XDP_NOTE_MAGIC 0x4c495350 /* "LISP" */

/* What underlay_xdp needs of an inner header: its family, TTL and
 * destination (for the RTR's look-up). */
struct xdp_inner {
	__u8 family;
	__u8 ttl;
	struct addr dst;
};

/* xdp_inner_of reads the inner IP header at ip, or returns -1 for what
 * the tc program should see (not IP, cut short). */
static __always_inline int xdp_inner_of(void *ip, void *end, struct xdp_inner *in)
{
	if (ip + 1 > end)
		return -1;
	__u8 v = *(__u8 *)ip >> 4;
	if (v == 4) {
		struct iphdr *h = ip;
		if ((void *)(h + 1) > end || h->ihl < 5)
			return -1;
		in->family = AF_INET;
		in->ttl = h->ttl;
		in->dst.a[0] = h->daddr;
		return 0;
	}
	if (v == 6) {
		struct ipv6hdr *h = ip;
		if ((void *)(h + 1) > end)
			return -1;
		in->family = AF_INET6;
		in->ttl = h->hop_limit;
		__builtin_memcpy(&in->dst, &h->daddr, 16);
		return 0;
	}
	return -1;
}

/* xdp_lower_ttl copies a smaller outer TTL into the inner header, as the
 * tc ETR does (RFC 9300 §5.3), before GRO: GRO merges only packets of
 * equal TTL. */
static __always_inline void xdp_lower_ttl(void *ip, void *end, const struct xdp_inner *in, __u8 outer_ttl)
{
	if (outer_ttl >= in->ttl)
		return;
	if (in->family == AF_INET) {
		struct iphdr *h = ip;
		if ((void *)(h + 1) <= end)
			put_ttl4((struct ttl4 *)&h->ttl, outer_ttl);
		return;
	}
	struct ipv6hdr *h = ip;
	if ((void *)(h + 1) <= end)
		h->hop_limit = outer_ttl;
}

/* xdp_decapsulate strips the outer headers (overhead bytes after the
 * Ethernet header) and leaves the note for tc; the Ethernet header is
 * rewritten in front of the inner packet. It returns -1, having changed
 * nothing, when the driver keeps no metadata. */
static __always_inline int xdp_decapsulate(struct xdp_md *ctx, __u32 overhead, __u8 family, __u32 iid)
{
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct xdp_note)))
		return -1;
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return -1;
	__u8 macs[2 * ETH_ALEN];
	__builtin_memcpy(macs, eth, sizeof(macs));
	if (bpf_xdp_adjust_head(ctx, overhead)) {
		bpf_xdp_adjust_meta(ctx, sizeof(struct xdp_note));
		return -1;
	}
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	void *meta = (void *)(long)ctx->data_meta;
	eth = data;
	struct xdp_note *note = meta;
	if ((void *)(eth + 1) > end || (void *)(note + 1) > data)
		return -1;
	__builtin_memcpy(eth, macs, sizeof(macs));
	eth->h_proto = eth_proto_of(family);
	note->magic = XDP_NOTE_MAGIC;
	note->iid = iid;
	return 0;
}

/* The outer headers of an IPv4 or IPv6 packet to port 4341, read in
 * place: only IPv4 headers without options. */
struct xdp_outer {
	__u8 family;
	__u8 ttl;
	__u16 overhead; /* outer IP, UDP and LISP */
	struct addr src;
	struct addr dst;
	struct lisphdr *lisp;
};

static __always_inline int xdp_outer_of(void *data, void *end, struct xdp_outer *o)
{
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return -1;
	struct udphdr *udp;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *h = (void *)(eth + 1);
		if ((void *)(h + 1) > end || h->ihl != 5 || h->protocol != IPPROTO_UDP ||
		    (h->frag_off & bpf_htons(IP_MF | IP_OFFSET)))
			return -1;
		o->family = AF_INET;
		o->ttl = h->ttl;
		o->overhead = OVERHEAD4;
		o->src.a[0] = h->saddr;
		o->dst.a[0] = h->daddr;
		udp = (void *)(h + 1);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *h = (void *)(eth + 1);
		if ((void *)(h + 1) > end || h->nexthdr != IPPROTO_UDP)
			return -1;
		o->family = AF_INET6;
		o->ttl = h->hop_limit;
		o->overhead = OVERHEAD6;
		__builtin_memcpy(&o->src, &h->saddr, 16);
		__builtin_memcpy(&o->dst, &h->daddr, 16);
		udp = (void *)(h + 1);
	} else {
		return -1;
	}
	o->lisp = (void *)(udp + 1);
	if ((void *)(o->lisp + 1) > end || udp->dest != bpf_htons(LISP_DATA_PORT))
		return -1;
	return 0;
}

SEC("xdp")
int underlay_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct xdp_outer o = {};
	if (xdp_outer_of(data, end, &o) || !is_rloc(o.family, &o.dst))
		return XDP_PASS;
	struct lisphdr lh = *o.lisp;
	void *ip = (void *)(o.lisp + 1);
	struct xdp_inner in = {};
	if (xdp_inner_of(ip, end, &in))
		return XDP_PASS;
	/* LISP-GPE whose payload is not the IP packet found: tc's, which
	 * drops it. */
	if ((lh.flags & LISP_P) && lh.nonce[2] != gpe_next_protocol(in.family))
		return XDP_PASS;
	__u32 word2 = bpf_ntohl(lh.word2);
	__u32 iid = (lh.flags & LISP_I) ? word2 >> 8 : 0;
	/* What an RTR sends on, or has no entry for, is tc's. */
	if (cfg_rtr) {
		struct pkt p = {.family = in.family, .dst = in.dst};
		struct mc_entry *e = lookup(iid, &p);
		__u32 pid = (lh.flags & LISP_L) ? 0 : word2 & 0xff;
		if (!e || onward(e, pid, &o.src, 1) >= 0)
			return XDP_PASS;
	}
	xdp_lower_ttl(ip, end, &in, o.ttl);
	if (xdp_decapsulate(ctx, o.overhead, in.family, iid))
		return XDP_PASS;
	count(C_ETR_DECAP);
	count(C_ETR_XDP);
	return XDP_PASS;
}

/* xdp_note_of returns the note underlay_xdp left on a packet it
 * decapsulated, or NULL. */
static __always_inline struct xdp_note *xdp_note_of(struct __sk_buff *skb)
{
	void *meta = (void *)(long)skb->data_meta;
	void *data = (void *)(long)skb->data;
	struct xdp_note *note = meta;
	if ((void *)(note + 1) > data || note->magic != XDP_NOTE_MAGIC)
		return NULL;
	return note;
}
