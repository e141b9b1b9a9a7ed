//go:build !linux

package maprequest

import (
	"context"
	"errors"
)

// Run needs Linux: the generator calls sendmmsg and recvmmsg itself and
// pins threads to CPUs, and the results come from /proc.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return nil, errors.New("the benchmark needs Linux")
}
