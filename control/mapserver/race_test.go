//go:build race

package mapserver

// The race detector's sync.Pool drops what is put back now and then, so
// that counting allocations tells nothing under it.
func init() { raceEnabled = true }
