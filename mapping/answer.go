package mapping

import (
	"net/netip"

	"github.com/amptcp/amptcp/lisp"
)

// AnswerKind is what the mapping system knows of an EID.
type AnswerKind uint8

const (
	// NotFound: no site's prefix covers the EID. A negative answer with a
	// long TTL; a DDT resolver would ask further instead.
	NotFound AnswerKind = iota
	// Unregistered: a site's prefix covers the EID but no ETR registered
	// it. A negative answer with a short TTL: it may register soon.
	Unregistered
	// Mapping: the map-server answers for the ETRs with Record.
	Mapping
	// Forward: the ETR at ETR answers for itself.
	Forward
)

var answerNames = [...]string{NotFound: "not-found", Unregistered: "unregistered", Mapping: "mapping", Forward: "forward"}

func (k AnswerKind) String() string { return answerNames[k] }

// Answer is what the mapping system says about one EID.
type Answer struct {
	Kind AnswerKind
	// EID is the prefix the answer covers: for negative answers the
	// largest prefix around the EID that holds nothing registered.
	EID EID
	// Record is the mapping to send, for Mapping; for Forward, the one
	// registered. It is shared: read it, do not change it.
	Record lisp.MapRecord
	// Wire, if not nil, is Record encoded (MapRecord.AppendBinary), which
	// a database that answers often keeps: a reply copies it. It is
	// shared too.
	Wire []byte
	// ETR is the address to forward the Map-Request to, for Forward.
	ETR netip.Addr
}

// Database answers for EIDs: the map-server's registrations now; other
// sources (a DDT client) later.
type Database interface {
	Resolve(iid uint32, eid netip.Addr) Answer
}

// WireDatabase is a Database that can append the record of a mapping
// encoded, without building an Answer: what a map-resolver's reply to
// the usual Map-Request, for one EID with a mapping, takes.
type WireDatabase interface {
	Database
	// AppendMapping appends to b the encoded record of the mapping of
	// eid in instance iid (Answer.Wire, or Record encoded) and returns
	// true, when Resolve would answer Mapping; otherwise it returns b
	// unchanged and false.
	AppendMapping(b []byte, iid uint32, eid netip.Addr) ([]byte, bool)
}
