/* Shared definitions of the LISP data plane: the layout of the maps the Go
 * side fills and reads (the Go side mirrors every struct here), the
 * settings it writes before loading, and the counters. */
#pragma once

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define AF_INET 2
#define AF_INET6 10

#define LISP_DATA_PORT 4341
#define MAX_PATHS 8
#define NO_SELF 0xff
#define NO_PATH 0xff

/* Encapsulation overhead after the Ethernet header: outer IP, UDP, LISP. */
#define LISP_HLEN 8
#define OVERHEAD4 (sizeof(struct iphdr) + sizeof(struct udphdr) + LISP_HLEN)
#define OVERHEAD6 (sizeof(struct ipv6hdr) + sizeof(struct udphdr) + LISP_HLEN)

/* path_slot bounds a path index that a global function returned: its
 * range is lost to the verifier when the compiler spills it, and a mask in
 * C would be optimized away after the caller's range check. */
static __always_inline __u32 path_slot(int i)
{
	__u32 v = i;
	asm volatile("%0 &= 7" : "+r"(v));
	return v;
}

/* An IPv4 address is in a[0]; all in network byte order. */
struct addr {
	__u32 a[4];
};

/* Settings, rewritten by the loader before the programs are loaded, so
 * that the verifier prunes what a router does not use. */
volatile const __u32 cfg_iid = 0;		  /* host order; 0: no I bit */
volatile const __u8 cfg_port_sum = 0;		  /* path-selection: port-sum */
volatile const __u8 cfg_source_port_sum = 0;	  /* source-selection: port-sum */
volatile const __u8 cfg_bind_subflows = 1;	  /* mptcp-subflows: bind */
volatile const __u8 cfg_stateful = 0;		  /* mptcp-subflows: bind-stateful */
volatile const __u8 cfg_previous_hop = 0;	  /* path-id: previous-hop */
volatile const __u8 cfg_miss_native = 0;	  /* miss: native-forward */
volatile const __u8 cfg_clamp_mss = 1;
volatile const __u8 cfg_rtr = 0;		  /* the rtr role runs */
volatile const __u8 cfg_direct_access = 1;	  /* 0: tests take load's bpf_skb_load_bytes path */
volatile const __u8 cfg_xdp = 0;		  /* underlay_xdp runs on some RLOC interface */
volatile const __u32 cfg_hold_ifindex = 0;	  /* lispd's hold device (miss: hold); 0: none */
volatile const __u32 cfg_hold_rtr_ifindex = 0;	  /* the RTR's, for encapsulated packets */
volatile const __u64 cfg_miss_interval_ns = 1000000000;

/* The map-cache: longest-prefix match on (instance ID, EID). The prefix
 * length counts the 32 bits of the instance ID (network order) first. */
struct mc_key4 {
	__u32 prefixlen;
	__u32 iid;
	__u32 addr;
};

struct mc_key6 {
	__u32 prefixlen;
	__u32 iid;
	__u32 addr[4];
};

enum mc_action {
	ACT_ENCAP = 0,
	ACT_NATIVE = 1,
	ACT_DROP = 2,
	ACT_SEND_MAP_REQUEST = 3,
	/* Packets from the site go to lispd's hold device, behind those it
	 * holds; what lispd releases through the device is sent on the
	 * paths (natively forwarded without any). */
	ACT_HOLD = 4,
};

/* A path is a plain RLOC (one hop) or an ELP. The loader precomputes what
 * the programs need of its hops: the first (where the ITR sends), and
 * where this router is in it (self), with the hops around it (for the
 * RTR). */
struct path {
	__u8 family; /* of every hop */
	__u8 priority;
	__u8 weight;
	__u8 up;
	__u8 self;   /* index of our RLOC among the hops, or NO_SELF */
	__u8 n_hops;
	__u8 gpe;    /* GPE_FIRST | GPE_NEXT */
	__u8 pad;
	struct addr first;
	struct addr prev; /* hop before self: zero when self is the first */
	struct addr next; /* hop after self: zero when self is the last */
};

/* The hops of a path that accept LISP-GPE (dataplane.lisp-gpe.peers):
 * the first, which the ITR sends to, and the one after this router,
 * which the RTR sends to. */
#define GPE_FIRST 1
#define GPE_NEXT 2

struct mc_entry {
	__u8 action;
	__u8 n_paths;
	__u8 pad[6];
	struct path paths[MAX_PATHS];
};

/* The RLOCs of this router, which the ETR and RTR take packets for. */
struct rloc_key {
	__u8 family;
	__u8 pad[3];
	struct addr addr;
};

/* What an RLOC interface sends encapsulated packets with, and its
 * gateways for source-selection port-sum (gw4 0, has_gw6 0: none). */
struct egress {
	__u32 src4;
	struct addr src6;
	__u16 mtu;
	__u8 has4;
	__u8 has6;
	__u32 gw4;
	struct addr gw6;
	__u8 has_gw6;
	__u8 pad[3];
};

/* An RLOC interface and what it sends with. */
struct egress_if {
	__u32 ifindex;
	struct egress eg;
};

/* The first RLOCs and RLOC interfaces, which the loader writes with the
 * settings (the maps rlocs and egress_ifs hold them all): the programs
 * find them without a map lookup. */
#define FAST_RLOCS 8
#define FAST_EGRESS 8
volatile const __u32 cfg_n_rlocs = 0;  /* of them all */
volatile const struct rloc_key cfg_rlocs[FAST_RLOCS] = {};
volatile const __u32 cfg_n_egress = 0; /* of them all */
volatile const struct egress_if cfg_egress[FAST_EGRESS] = {};

/* A miss reported to the Go side (and the key that rate-limits it). */
struct miss {
	__u32 iid; /* host order */
	__u8 family;
	__u8 pad[3];
	struct addr eid;
};

/* An MPTCP key, 8 bytes as on the wire. */
struct mptcp_key {
	__u8 b[8];
};

/* An MPTCP subflow, seen from this router's site: local is the host
 * behind us. */
struct flow_key {
	__u32 iid;
	__u8 family;
	__u8 pad;
	__u16 lport; /* network order */
	__u16 rport;
	__u16 pad2;
	struct addr local;
	struct addr remote;
};

#define SF_INITIATOR 1 /* the local host sent the SYN */
#define SF_CLOSING 2   /* a FIN was seen */
#define SF_LEARN 4     /* opened the connection, whose tokens are not known yet */
#define SF_PINNED 8    /* on the path the destination's ETR chose (stateful) */
#define SF_ASKED 16    /* its path is being asked for: look for a pin */

struct subflow {
	__u64 conn;
	__u64 last_ns;
	__u64 packets; /* encapsulated on path */
	__u64 bytes;
	__u8 path;     /* NO_PATH until the first packet out binds it */
	__u8 flags;
	__u8 pad[6];
};

/* An MPTCP connection: how many of its subflows use each path. */
struct conn {
	__u32 on_path[MAX_PATHS];
	__u64 created_ns;
	__u32 has_tokens;
	__u32 pad;
};

/* A new subflow the ITR bound, reported for the control plane to ask the
 * destination's ETR for its path (stateful binding): from the local host,
 * with the path it was sent on meanwhile. */
struct subflow_event {
	struct flow_key key;
	__u64 conn;
	__u8 path;
	__u8 flags;
	__u8 pad[6];
};
/* The Go side reads it by these offsets (types.go). */
_Static_assert(sizeof(struct flow_key) == 44 && __builtin_offsetof(struct subflow_event, conn) == 48 &&
		       __builtin_offsetof(struct subflow_event, path) == 56 && sizeof(struct subflow_event) == 64,
	       "subflow_event layout");

enum counter {
	C_ITR_ENCAP,
	C_ITR_NATIVE,	     /* entry says natively-forward (site-local EIDs too) */
	C_ITR_MISS_DROP,
	C_ITR_MISS_NATIVE,
	C_ITR_MISS_REPORTED, /* sent to the Go side */
	C_ITR_MISS_LOST,     /* ring buffer full */
	C_ITR_ACTION_DROP,   /* negative entry: drop or send-map-request */
	C_ITR_NO_PATH,	     /* no path up */
	C_ITR_NO_ROUTE,	     /* no route to the RLOC */
	C_ITR_NO_SOURCE,     /* egress interface has no RLOC of the family */
	C_ITR_SOURCE_PORT_SUM, /* own RLOC chosen by the port sum */
	C_ITR_TOO_BIG,
	C_ITR_MSS_CLAMPED,
	C_ITR_ENCAP_FAILED,
	C_ITR_NOT_IP,
	C_ITR_LOCAL,	     /* multicast, broadcast, link-local: not for the overlay */
	C_ETR_DECAP,
	C_ETR_MALFORMED,
	C_ETR_FRAGMENT,	     /* outer fragments: left to the kernel */
	C_ETR_DECAP_FAILED,
	C_RTR_REENCAP,
	C_RTR_MISS,
	C_RTR_NO_ROUTE,
	C_RTR_TTL,
	C_RTR_FAMILY_CHANGE, /* next hop of the other family: not supported */
	C_RTR_AMBIGUOUS,     /* no path ID and several ELPs through us */
	C_SUBFLOW_NEW,	     /* MP_CAPABLE SYN */
	C_SUBFLOW_JOIN,	     /* MP_JOIN SYN of a known connection */
	C_SUBFLOW_JOIN_UNKNOWN,
	C_SUBFLOW_BOUND,
	C_SUBFLOW_REBOUND,   /* its path went down */
	C_SUBFLOW_RESET,
	C_SUBFLOW_FIN,
	C_SUBFLOW_TOKENS,
	C_ITR_TTL_EXPIRED,   /* inner TTL 1: left to the kernel, which answers Time Exceeded */
	C_ETR_XDP,	     /* of C_ETR_DECAP: decapsulated in XDP */
	C_ITR_HELD,	     /* handed to lispd to hold while their mapping is resolved */
	C_ITR_RELEASED,	     /* released by lispd: forwarded as their entry says */
	C_RTR_HELD,	     /* the same at an RTR */
	C_RTR_RELEASED,
	C_SUBFLOW_ASKED,     /* reported for stateful binding */
	C_SUBFLOW_ASK_LOST,  /* ring buffer full: the subflow stays where it is */
	C_SUBFLOW_PINNED,    /* moved to (or kept on) the path its ETR chose */
	C_SUBFLOW_PIN_REFUSED, /* the path chosen is not usable here, or none was */
	C_RTR_UNRESOLVED,    /* the next hop is an EID not looked up yet */
	C_ITR_GPE,	     /* of C_ITR_ENCAP: with a LISP-GPE header */
	C_RTR_GPE,	     /* of C_RTR_REENCAP: sent on with a LISP-GPE header */
	C_ETR_NOT_IP,	     /* LISP-GPE whose payload is not IP: dropped */
	C_GRO_DROPPED,	     /* what the GRO device's socket took: dropped */
	C_COUNTERS,
};

/* Per-path counters at the ITR (by path index) and the RTR (by path ID). */
struct path_stats {
	__u64 packets;
	__u64 bytes;
};
