package report

import "github.com/amptcp/amptcp/lab/results"

// The results directory's format is lab/results'; the report speaks of
// its types by these names.
type (
	Results      = results.Results
	Meta         = results.Meta
	Run          = results.Run
	Event        = results.Event
	Variant      = results.Variant
	Fidelity     = results.Fidelity
	PathFidelity = results.PathFidelity
	LinkSample   = results.LinkSample
	LoadError    = results.LoadError
)

// The files of a results directory.
const (
	MetaFile    = results.MetaFile
	RunsFile    = results.RunsFile
	RecordsFile = results.RecordsFile
)

// Load reads the results directory dir; every error is a *LoadError.
func Load(dir string) (*Results, error) { return results.Load(dir) }
