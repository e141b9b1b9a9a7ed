//go:build !cgo

// Package cref builds the congestion controls' C arithmetic for user
// space; without cgo it is empty and the differential test skips.
package cref

// Available says that the C build is there (cgo is on).
const Available = false
