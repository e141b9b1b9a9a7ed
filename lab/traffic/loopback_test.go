package traffic

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestLoopback runs the stream protocol over TCP on loopback: an upload,
// a download, and a client whose header is garbage.
func TestLoopback(t *testing.T) {
	srv, err := Listen("127.0.0.1:0", ListenOptions{Protocol: TCP, HeaderTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, nil) }()
	addr := srv.Addr().String()

	for _, dir := range []Direction{Upload, Download} {
		f := Flow{ID: "lo-" + dir.String(), Kind: Transfer, Protocol: TCP, CongestionControl: "reno", Direction: dir, Bytes: 1<<20 + 7}
		st, err := Dial(ctx, f, addr)
		if err != nil {
			t.Fatal(err)
		}
		col := &Collector{}
		res, err := st.Run(ctx, col)
		if err != nil || res.Bytes != 1<<20+7 || res.CongestionControl != "reno" || res.Completion <= 0 {
			t.Errorf("%s: %+v, %v; want %d bytes with reno", dir, res, err, 1<<20+7)
		}
		recs := col.Records()
		if last := recs[len(recs)-1]; last.Kind != KindResult || last.Flow != f.ID {
			t.Errorf("%s: last record %+v; want the result", dir, last)
		}
	}

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.0\r\n\r\n0123456789abcdef"))
	c.Close()

	srv.Close()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	res := srv.Results()
	if len(res) != 3 {
		t.Fatalf("server results: %+v; want 3", res)
	}
	var he *HeaderError
	bad := 0
	for _, r := range res {
		if errors.As(r.Err, &he) && he.Field == "magic" {
			bad++
		} else if r.Err != nil || r.Bytes != 1<<20+7 {
			t.Errorf("server result %+v", r)
		}
	}
	if bad != 1 {
		t.Errorf("results %+v; want one refused for its magic", res)
	}
}
