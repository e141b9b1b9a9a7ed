// Package linkemu emulates WAN links in user space, because this kernel
// has no netem: each link joins two TAP devices, usually in two network
// namespaces, and every frame read from one goes, per direction, through
// loss (Bernoulli or Gilbert-Elliott), a byte-limited drop-tail queue, a
// serializer at the link rate and a fixed propagation delay before it is
// written to the other.
//
// One Emulator serves all links from one event-loop goroutine locked to
// its OS thread. The loop waits in ppoll(2) with a nanosecond timeout
// until the next frame is due or a TAP has frames to read (it reads them
// in batches); Go timers overshoot by about a millisecond here and are
// not used for frame timing. Links can be changed (rate, delay, loss,
// queue, down and up) from any goroutine while the loop runs, and expose
// per-direction counters and a histogram of how late frames were
// written. See docs/linkemu.md for the model and its measured fidelity.
package linkemu
