/* What the coupled congestion controls share: the connection state in the
 * map (one entry per MPTCP connection, keyed by its local token, one slot
 * per subflow), the per-socket state in icsk_ca_priv, and the view of the
 * TCP socket that the arithmetic in ccmath.h works on. The Go side
 * mirrors struct amp_conn and struct amp_slot (bpf2go -type); the
 * user-space build of ccmath.h (cc/internal/cref) uses all of it.
 *
 * Only fixed-width types from <linux/types.h>: this header is compiled
 * both for BPF and for user space. */
#pragma once

#include <linux/types.h>

/* AMP_SLOTS is the kernel's own limit of subflows per connection. */
#define AMP_SLOTS 8
#define AMP_NO_SLOT 0xff

/* Fixed point: coupling terms, credits and normalised rates carry 16
 * fraction bits. */
#define AMP_FP 16
#define AMP_ONE (1ULL << AMP_FP)

/* Bounds that keep every product in ccmath.h within 64 bits (each use
 * argues its own bound from these). A window above AMP_WMAX packets or an
 * RTT above AMP_RTT_MAX is counted as that much in the coupling terms;
 * neither occurs on a real path (2^20 packets is 1.5 GB in flight, 2^24
 * µs is 16.7 s). */
#define AMP_WMAX (1U << 20)
#define AMP_RTT_MAX (1U << 24)

/* The algorithms, as the map's entries and the user-space build name
 * them. */
enum amp_algo {
	AMP_RENO = 0,
	AMP_LIA = 1,
	AMP_OLIA = 2,
	AMP_BALIA = 3,
	AMP_WVEGAS = 4,
};

/* What one subflow publishes for the others of its connection. Written
 * only by the subflow that owns the slot, read by all: a reader may see
 * one field updated and not the next, which moves a coupling term by one
 * ACK's worth, as the out-of-tree kernel's unlocked reads of its sibling
 * sockets did. */
struct amp_slot {
	__u32 id;        /* the kernel's subflow id (1 for the first); 0: free */
	__u32 cwnd;      /* packets; ssthresh while a loss is being repaired */
	__u32 rtt_us;    /* smoothed RTT; 0 until the first sample */
	__s32 alpha;     /* the coupling term applied to this subflow, 2^-16 */
	__u64 acked;     /* bytes acknowledged (tcp_sock.bytes_acked) */
	__u64 loss_prev; /* OLIA: bytes acknowledged between the last two losses */
	__u64 loss_mark; /* OLIA: acked at the last loss */
	__u64 rate;      /* wVegas: cwnd/RTT at its last evaluation, 2^-32 packets/µs */
	__u64 seen;      /* when its subflow last ran a callback (CLOCK_MONOTONIC, ns) */
};

/* One MPTCP connection: the value of the conns map, keyed by the local
 * token (tokens are unique among the live connections of a host). */
struct amp_conn {
	__u32 refs;  /* slots claimed; the last subflow to leave deletes the entry */
	__u32 algo;  /* enum amp_algo */
	__u64 alpha; /* LIA's alpha, 2^-16 */
	struct amp_slot slots[AMP_SLOTS];
};

/* The per-socket state, in icsk_ca_priv (at most 104 bytes). */
struct amp_priv {
	__u32 token;     /* the connection's token; 0: not coupled (yet) */
	__u32 sub_id;    /* the kernel's subflow id, the owner mark of its slot */
	__u8 slot;       /* the slot this subflow claimed, AMP_NO_SLOT if none */
	__u8 mptcp;      /* the socket is an MPTCP subflow */
	__u8 ca_state;   /* the last TCP_CA_* state set_state saw */
	__u8 vegas_on;   /* (w)Vegas: measuring in this round (state Open) */
	__u8 ready;      /* set up (the kernel zeroes the state before) */
	__u8 pad[3];
	__s64 credit;    /* window increase owed, 2^-16 packets per packet of cwnd */
	__u64 loss_prev; /* OLIA, as in struct amp_slot */
	__u64 loss_mark;
	/* (w)Vegas, per round of one RTT */
	__u32 beg_snd_nxt; /* the round ends when this is acknowledged */
	__u32 cnt_rtt;     /* RTT samples in this round */
	__u64 sum_rtt;     /* their sum, µs */
	__u32 min_rtt;     /* their minimum, µs */
	__u32 base_rtt;    /* the minimum RTT ever seen, µs */
	__u32 alpha;       /* wVegas: this subflow's share of the queue, 2^-16 packets */
	__u32 queue_delay; /* wVegas: the least queueing delay since the last drain, µs */
	__u32 last_ss;     /* the threshold ssthresh returned last */
	__u32 max_set;     /* the largest window or threshold this control set */
	/* proportional rate reduction (cong_control) */
	__u32 prr_high;      /* tp->high_seq of the reduction prr_delivered counts for */
	__u32 prr_delivered; /* packets delivered since it began */
};

/* The TCP socket as the arithmetic sees it: the BPF programs copy it in
 * from struct tcp_sock and the changed fields back; the user-space build
 * drives it directly. */
struct amp_tcp {
	__u32 cwnd;
	__u32 cwnd_cnt;
	__u32 ssthresh;
	__u32 clamp;
	__u32 srtt_us;      /* smoothed RTT, µs (tcp_sock.srtt_us >> 3) */
	__u32 snd_nxt;
	__u32 prior_cwnd;
	__u32 cwnd_limited; /* tcp_is_cwnd_limited() */
	__u64 bytes_acked;
};

/* A per-subflow rule of the sockops program: what it matches (addresses
 * in network order, masked; an RTT of 0 matches any) and the control it
 * sets. */
#define AMP_MAX_RULES 8

struct amp_rule {
	__u32 local, local_mask;
	__u32 remote, remote_mask;
	__u32 rtt_above_us;
	__u32 used;
	__u64 matched; /* subflows it set, counted */
	char cc[16];
};

/* Counters, a per-CPU array indexed by these. */
enum amp_counter {
	AMP_CNT_ACKS,          /* cong_avoid calls */
	AMP_CNT_LOSSES,        /* ssthresh calls: losses and ECN reductions */
	AMP_CNT_COUPLED_ACKS,  /* cong_avoid calls of subflows in a connection's entry */
	AMP_CNT_CONN_CREATED,  /* connection entries created */
	AMP_CNT_CONN_DELETED,  /* and deleted by their last subflow */
	AMP_CNT_MAP_FULL,      /* an entry could not be created: the subflow runs uncoupled */
	AMP_CNT_SLOTS_FULL,    /* a connection had no free slot: the subflow runs uncoupled */
	AMP_CNT_SUBFLOWS,      /* inits of MPTCP subflows */
	AMP_CNT_PLAIN,         /* inits of plain TCP sockets */
	AMP_CNT_EARLY,         /* sockets whose first callback came before init */
	AMP_CNT_SWEPT,         /* entries removed after AMP_IDLE without a callback */
	AMP_CNT_INSANE,        /* windows or thresholds found far above any this control set */
	AMP_CNT_MAX,
};
