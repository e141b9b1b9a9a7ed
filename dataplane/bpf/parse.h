/* Parsing of IP packets and TCP options. Headers are copied out (load):
 * copies keep the verifier's bookkeeping simple. */
#pragma once

#include "common.h"

/* load reads the linear area at offsets below this: past the headers of
 * anything the programs parse. A power of 2. */
#define DIRECT_OFF_LIMIT 1024

/* load copies len bytes at off into to: straight from the linear area,
 * where the headers of forwarded packets are, else (headers in paged
 * data) with bpf_skb_load_bytes, whose call costs more than the copy.
 * Telling clang the headers are 4-byte aligned (after Ethernet they are
 * 2-byte aligned) makes it copy words, not bytes: the architectures the
 * programs run on (x86-64, arm64) load unaligned words, and the verifier
 * allows it there. */
static __always_inline int load(struct __sk_buff *skb, __u32 off, void *to, const __u32 len)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	if (cfg_direct_access && off < DIRECT_OFF_LIMIT) {
		/* The same bound for the verifier, on the register that
		 * clang adds to the pointer. */
		asm volatile("%0 &= %1" : "+r"(off) : "i"(DIRECT_OFF_LIMIT - 1));
		void *from = data + off;
		if (from + len <= end) {
			__builtin_memcpy(to, __builtin_assume_aligned(from, 4), len);
			return 0;
		}
	}
	return bpf_skb_load_bytes(skb, off, to, len);
}

#define IP_MF 0x2000
#define IP_OFFSET 0x1fff
#define IP_DF 0x4000

/* An IP packet: its addresses and what the data plane needs of its
 * transport header. */
struct pkt {
	__u8 family;
	__u8 proto;
	__u8 fragment; /* a fragment: no ports */
	__u8 tcp_flags;
	__u8 ttl;
	__u8 tos;
	__u16 l3_len;	  /* IP header length */
	__u16 l4_off;	  /* from the start of the frame */
	__u16 tcp_hlen;	  /* TCP header length with options */
	__u16 sport;	  /* network order */
	__u16 dport;
	__u32 len;	  /* from the IP header to the end */
	struct addr src;
	struct addr dst;
};

#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_ACK 0x10

/* parse_ip reads the IP packet at off. It returns 0, or -1 for what is
 * not IPv4 or IPv6 or is cut short. */
static __always_inline int parse_ip(struct __sk_buff *skb, __u32 off, __u8 family, struct pkt *p)
{
	p->family = family;
	p->len = skb->len > off ? skb->len - off : 0;
	if (family == AF_INET) {
		struct iphdr ip;
		if (load(skb, off, &ip, sizeof(ip)))
			return -1;
		if (ip.version != 4 || ip.ihl < 5)
			return -1;
		p->l3_len = ip.ihl * 4;
		p->proto = ip.protocol;
		p->ttl = ip.ttl;
		p->tos = ip.tos;
		p->fragment = (ip.frag_off & bpf_htons(IP_MF | IP_OFFSET)) != 0;
		p->src.a[0] = ip.saddr;
		p->dst.a[0] = ip.daddr;
	} else {
		struct ipv6hdr ip6;
		if (load(skb, off, &ip6, sizeof(ip6)))
			return -1;
		if (ip6.version != 6)
			return -1;
		p->l3_len = sizeof(ip6);
		/* Extension headers are not walked: ports are read only when
		 * TCP or UDP follows the fixed header, which is the rule. */
		p->proto = ip6.nexthdr;
		p->ttl = ip6.hop_limit;
		p->tos = (ip6.priority << 4) | (ip6.flow_lbl[0] >> 4);
		__builtin_memcpy(&p->src, &ip6.saddr, 16);
		__builtin_memcpy(&p->dst, &ip6.daddr, 16);
	}
	p->l4_off = off + p->l3_len;
	if (p->fragment)
		return 0;
	if (p->proto == IPPROTO_TCP) {
		struct tcphdr tcp;
		if (load(skb, p->l4_off, &tcp, sizeof(tcp)))
			return 0; /* forwarded without ports */
		p->sport = tcp.source;
		p->dport = tcp.dest;
		p->tcp_hlen = tcp.doff * 4;
		p->tcp_flags = ((__u8 *)&tcp)[13];
	} else if (p->proto == IPPROTO_UDP) {
		struct udphdr udp;
		if (load(skb, p->l4_off, &udp, sizeof(udp)))
			return 0;
		p->sport = udp.source;
		p->dport = udp.dest;
	}
	return 0;
}

/* family_of maps an Ethernet type to an address family, or 0. */
static __always_inline __u8 family_of(__u16 eth_proto)
{
	if (eth_proto == bpf_htons(ETH_P_IP))
		return AF_INET;
	if (eth_proto == bpf_htons(ETH_P_IPV6))
		return AF_INET6;
	return 0;
}

/* What the data plane needs of a TCP header's options. */
struct tcpopts {
	__u16 mss;	/* host order; 0: absent */
	__u16 mss_off;	/* of the MSS value, from the start of the options */
	__u8 mptcp;	/* 1 + the MPTCP option's subtype; 0: none */
	__u8 mptcp_len;
	__u8 keys;	/* MP_CAPABLE with both keys */
	__u8 learn;	/* the keys' tokens are for connection conn */
	__u64 conn;
	struct mptcp_key key1;	/* sender's key */
	struct mptcp_key key2;	/* receiver's key */
	__u8 token[4];	/* MP_JOIN SYN: the receiver's token */
};

#define TCPOPT_MSS 2
#define TCPOPT_MPTCP 30
#define MPTCP_MP_CAPABLE 0
#define MPTCP_MP_JOIN 1
#define MAX_OPTS 40

/* The state of a walk over TCP options, one option per bpf_loop step:
 * the verifier checks the step once, where a plain loop over options of
 * any length makes it explore every sequence of them. */
struct opt_walk {
	__u8 buf[MAX_OPTS];
	__u32 len;
	__u32 i;
	struct tcpopts o;
};

static long opt_step(__u32 n, struct opt_walk *w)
{
	__u32 i = w->i;
	if (i >= w->len || i >= MAX_OPTS - 1)
		return 1;
	__u8 kind = w->buf[i];
	if (kind == 0)
		return 1;
	if (kind == 1) {
		w->i = i + 1;
		return 0;
	}
	__u8 olen = w->buf[i + 1];
	if (olen < 2 || i + olen > w->len)
		return 1;
	if (kind == TCPOPT_MSS && olen == 4 && i + 3 < MAX_OPTS) {
		w->o.mss = (w->buf[i + 2] << 8) | w->buf[i + 3];
		w->o.mss_off = i + 2;
	} else if (kind == TCPOPT_MPTCP && olen >= 4 && i + 2 < MAX_OPTS) {
		__u8 subtype = w->buf[i + 2] >> 4;
		w->o.mptcp = subtype + 1;
		w->o.mptcp_len = olen;
		if (subtype == MPTCP_MP_CAPABLE && olen >= 20 && i + 19 < MAX_OPTS) {
			w->o.keys = 1;
			__builtin_memcpy(w->o.key1.b, &w->buf[i + 4], 8);
			__builtin_memcpy(w->o.key2.b, &w->buf[i + 12], 8);
		} else if (subtype == MPTCP_MP_JOIN && olen == 12 && i + 7 < MAX_OPTS) {
			__builtin_memcpy(w->o.token, &w->buf[i + 4], 4);
		}
	}
	w->i = i + olen;
	return 0;
}

/* parse_tcp_options finds the MSS and MPTCP options of the TCP header at
 * p->l4_off. It returns -1 when the options cannot be read. A global
 * function: the verifier checks it once, not at every call. */
__noinline int parse_tcp_options(struct __sk_buff *skb, const struct pkt *p, struct tcpopts *o)
{
	struct opt_walk w = {};
	if (!p || !o)
		return -1;
	__u32 len = p->tcp_hlen;
	if (len <= sizeof(struct tcphdr))
		return 0;
	len -= sizeof(struct tcphdr);
	if (len > MAX_OPTS)
		return -1;
	if (bpf_skb_load_bytes(skb, p->l4_off + sizeof(struct tcphdr), w.buf, len))
		return -1;
	w.len = len;
	bpf_loop(MAX_OPTS, opt_step, &w, 0);
	__u8 learn = o->learn;
	__u64 conn = o->conn;
	*o = w.o;
	o->learn = learn;
	o->conn = conn;
	return 0;
}
