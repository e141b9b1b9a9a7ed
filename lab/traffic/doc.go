// Package traffic generates the lab's traffic and measures it: stream
// flows over MPTCP or TCP (a transfer of N bytes, or a saturated flow for
// a duration), background UDP at a rate, and all-to-all patterns of
// them; every flow sampled every 100 ms into typed records that a Writer
// turns into JSON lines.
//
// # Namespaces
//
// Dial, Listen, DialUDP and ListenUDP open their socket in the network
// namespace of the calling thread, like internal/testnet's Node.Dial: the
// lab calls them inside a node's namespace (netns.NS.Do). The socket stays
// there, so Run and Serve may run on any goroutine.
//
// # Stream flows
//
// The client sends a 32-byte header (see appendHeader) with the flow's
// kind, direction, size or duration, congestion control and id; then the
// sender (the client for an Upload, the server for a Download) writes the
// payload and half-closes, the receiver answers with the 8-byte count of
// bytes it got (the application's acknowledgement) and half-closes, and
// the sender closes. Congestion control is set on every socket before
// any payload: by the dialer's Control before connect, and on the
// accepted socket from the header, because the kernel's default here is
// bbr. A Result reports the congestion control read back from the socket.
//
// A Transfer's completion time runs from the client's dial to the last
// byte received (the client receives a Download) or to the receiver's
// acknowledgement of all bytes (the client sends an Upload).
//
// # Samples
//
// Each flow has a ticker goroutine that samples every Flow.Interval and
// stamps each record with the time it really took the sample, not the
// nominal tick. The sender reads its socket: MPTCP_FULL_INFO on an MPTCP
// connection gives a KindConnection record (struct mptcp_info) and a
// KindSubflow record per subflow with its kernel id and addresses (struct
// tcp_info: bytes, RTT, cwnd, retransmissions, delivery rate); a TCP
// connection, or an MPTCP one that fell back, gives one KindSubflow record
// (subflow 0) from TCP_INFO. The receiver records KindReceiver samples:
// bytes so far, goodput over the interval since the previous sample
// (measured on the real interval), and jitter.
//
// # Jitter
//
// [MPTCP-failures] defines application jitter as the variance of data units'
// arrival times. Here the received stream is cut into consecutive
// DataUnit-byte (16 KiB) units; a unit arrives when the read that completes
// it returns, and Jitter is the standard deviation (population) of the
// gaps between consecutive units' arrivals, per interval in samples and
// over the whole flow in results; MaxGap is the longest gap. Fixed-size
// units make the gaps independent of how the kernel splits the reads; the
// standard deviation rather than the variance keeps the unit of time,
// comparable with RTTs. RFC 3550's smoothed jitter was not chosen: it
// needs the sender's send time of each unit, which for a bulk TCP flow
// reflects the congestion window, not the application, and its 1/16
// smoothing hides the stall of a failing path that [MPTCP-failures] looks for.
//
// # Background UDP
//
// A Background flow sends datagrams of Flow.Datagram bytes at Flow.Rate
// bits per second of UDP payload (as iperf3 -b). Datagram i is due at
// i*size/rate after the start; the sender wakes every millisecond and
// sends all that are due, so timer overshoot makes a burst, never a lower
// rate. A UDPSink counts bytes, datagrams and losses (from sequence
// numbers) per flow and samples each flow's goodput.
package traffic
