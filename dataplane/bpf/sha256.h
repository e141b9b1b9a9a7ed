/* SHA-256 of an 8-byte MPTCP key, for its token (RFC 8684 §3.2: the most
 * significant 32 bits of SHA-256 of the key). An MP_JOIN names its
 * connection by the token of the receiver's key, and the keys pass in the
 * clear in the MP_CAPABLE handshake: hashing them here lets the data
 * plane group subflows by connection without the Go side in the path. */
#pragma once

#include "common.h"

static __always_inline __u32 ror32(__u32 x, int n)
{
	return (x >> n) | (x << (32 - n));
}

static const __u32 sha256_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* mptcp_token returns the token of key (8 bytes as on the wire) in wire
 * byte order, as an MP_JOIN carries it. The message is one block: the key,
 * the 0x80 pad byte, zeros, and the length, 64 bits. */
__noinline __u32 mptcp_token(const struct mptcp_key *k)
{
	__u32 w[16] = {};
	if (!k)
		return 0;
	const __u8 *key = k->b;
	w[0] = ((__u32)key[0] << 24) | ((__u32)key[1] << 16) | ((__u32)key[2] << 8) | key[3];
	w[1] = ((__u32)key[4] << 24) | ((__u32)key[5] << 16) | ((__u32)key[6] << 8) | key[7];
	w[2] = 0x80000000;
	w[15] = 64;

	__u32 a = 0x6a09e667, b = 0xbb67ae85, c = 0x3c6ef372, d = 0xa54ff53a;
	__u32 e = 0x510e527f, f = 0x9b05688c, g = 0x1f83d9ab, h = 0x5be0cd19;
#pragma clang loop unroll(disable)
	for (int i = 0; i < 64; i++) {
		__u32 wi;
		if (i < 16) {
			wi = w[i];
		} else {
			__u32 w15 = w[(i - 15) & 15], w2 = w[(i - 2) & 15];
			__u32 s0 = ror32(w15, 7) ^ ror32(w15, 18) ^ (w15 >> 3);
			__u32 s1 = ror32(w2, 17) ^ ror32(w2, 19) ^ (w2 >> 10);
			wi = w[i & 15] = w[(i - 16) & 15] + s0 + w[(i - 7) & 15] + s1;
		}
		__u32 t1 = h + (ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25)) + ((e & f) ^ (~e & g)) + sha256_k[i] + wi;
		__u32 t2 = (ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		h = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	return bpf_htonl(0x6a09e667 + a);
}
