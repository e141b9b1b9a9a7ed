package report

import (
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"

	"github.com/amptcp/amptcp/lab/results"

	"github.com/amptcp/amptcp/internal/texttable"
	"github.com/amptcp/amptcp/lab/claims"
)

// HTMLFile is the name of the report's page in its directory.
const HTMLFile = "report.html"

// pageData is what the page's template sees.
type pageData struct {
	Results  *Results
	Summary  *Summary
	Settings [][2]string
	Failed   int
	Flagged  int
	Plots    []Plot
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"number": texttable.Number,
	"ci":     ciText,
	"fidelityText": func(f *Fidelity) string {
		if f == nil {
			return "not measured"
		}
		return fidelityText(f)
	},
	"variantOf": func(s *Summary, i int) VariantSummary { return s.Variants[i] },
	// verdictClass is a verdict as a class name (NOT RUN: NOT).
	"verdictClass": func(v claims.Verdict) string { return strings.Fields(string(v))[0] },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>amptcp lab report</title>
<style>
body { font-family: sans-serif; margin: 2em; max-width: 80em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #bbb; padding: 0.2em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.flagged, td.flagged { background: #fdd; color: #a00; }
tr.failed { background: #eee; color: #666; }
td.PASS { background: #dfd; color: #060; font-weight: bold; }
td.FAIL { background: #fdd; color: #a00; font-weight: bold; }
td.NOT { background: #eee; color: #555; font-weight: bold; }
td.text { text-align: left; }
pre { background: #f4f4f4; padding: 0.5em; overflow-x: auto; }
img { max-width: 100%; }
</style></head><body>
<h1>amptcp lab report</h1>
<h2>Experiment</h2>
<table>
<tr><td>scenario</td><td>{{.Results.Meta.Scenario}}</td></tr>
<tr><td>started</td><td>{{.Results.Meta.Started.Format "2006-01-02 15:04:05 MST"}}</td></tr>
<tr><td>kernel</td><td>{{.Results.Meta.Kernel}}</td></tr>
<tr><td>CPUs</td><td>{{.Results.Meta.CPUs}}</td></tr>
<tr><td>version</td><td>{{.Results.Meta.Version}}{{with .Results.Meta.GoVersion}} ({{.}}){{end}}</td></tr>
<tr><td>runs</td><td>{{len .Results.Runs}} ({{.Failed}} failed, {{.Flagged}} missed fidelity)</td></tr>
{{range .Settings}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td></tr>
{{end}}</table>
{{with .Results.Meta.ScenarioSource}}<details><summary>scenario file</summary><pre>{{.}}</pre></details>{{end}}
{{with .Results.Meta.TopologySource}}<details><summary>topology file</summary><pre>{{.}}</pre></details>{{end}}

{{with .Summary.Claims}}<h2>Claims</h2>
<p>Each of the paper's results the scenario states: the value the runs measured (the verdict is on
it), its 95 % confidence interval, the range the paper's figure accepts. NOT RUN says why.</p>
<table class="claims">
<tr><th>claim</th><th>verdict</th><th>value</th><th>95% CI</th><th>range</th><th>n</th><th>figure</th><th>what</th><th>the paper</th><th>note</th></tr>
{{range .}}<tr><td>{{.ID}}</td><td class="{{verdictClass .Verdict}}">{{.Verdict}}</td><td>{{.ValueText}}</td><td>{{.IntervalText}}</td>
<td>{{.Range}}</td><td>{{.N}}{{if .NOver}}/{{.NOver}}{{end}}</td><td>{{.Figure}}</td><td class="text">{{.What}} ({{.Unit}}){{with .P}}; Mann-Whitney p {{printf "%.3g" .}}{{end}}</td>
<td class="text">{{.Says}}</td><td class="text">{{.Reason}}{{if and .Reason .Note}}; {{end}}{{.Note}}</td></tr>
{{end}}</table>
{{end}}{{with .Summary.ClaimsError}}<p>claims: {{.}}</p>{{end}}
{{with .Results.Meta.Calibration}}<h2>Calibration</h2>
<table><tr><th>link</th><th>param</th><th>found</th></tr>
{{range .}}<tr><td>{{.Link}}{{with .Direction}} {{.}}{{end}}</td><td>{{.Param}}</td><td class="text">{{.}}</td></tr>
{{end}}</table>{{end}}

<h2>Summary</h2>
<p>Median of the samples (one per flow, from runs without an error) and its 95 % confidence
interval from order statistics (none below 6 samples). Rows in red include samples of runs that
missed the fidelity tolerances.</p>
{{range .Summary.Metrics}}{{$m := .}}
<h3>{{.Name}} ({{.Unit}})</h3>
<table class="summary">
<tr><th>variant</th><th>n</th><th>median</th><th>95% CI of median</th><th>mean</th><th>runs</th><th>failed runs</th><th>failed flows</th><th>flagged runs</th></tr>
{{range $i, $r := .Rows}}{{$v := variantOf $.Summary $i}}<tr{{if $r.Flagged}} class="flagged"{{end}}><td>{{$r.Variant}}</td><td>{{$r.N}}</td>
{{if $r.N}}<td>{{number $r.Median}}</td><td>{{ci $r.Stats}}</td><td>{{number $r.Mean}}</td>{{else}}<td>-</td><td>-</td><td>-</td>{{end}}
<td>{{$v.Runs}}</td><td>{{len $v.Failed}}</td><td>{{$r.FailedFlows}}</td><td>{{len $v.Flagged}}</td></tr>
{{end}}</table>
{{end}}

<h2>Runs and fidelity</h2>
<table class="runs">
<tr><th>run</th><th>variant</th><th>repetition</th><th>duration</th><th>fidelity</th><th>error</th></tr>
{{range .Results.Runs}}<tr{{if .Flagged}} class="flagged"{{else if .Error}} class="failed"{{end}}><td>{{.ID}}</td><td>{{.Variant.Name}}</td><td>{{.Repetition}}</td>
<td>{{if not .Ended.IsZero}}{{.Ended.Sub .Started}}{{end}}</td>
<td>{{if .Fidelity}}{{if .Fidelity.OK}}ok, p99 lateness {{.Fidelity.LatenessP99}}{{else}}MISSED: {{fidelityText .Fidelity}}{{end}}{{else}}not measured{{end}}</td>
<td>{{.Error}}{{with .Skipped}}skipped: {{.}}{{end}}</td></tr>
{{end}}</table>

<h2>Plots</h2>
{{range .Plots}}<figure><img src="{{.File}}" alt="{{.Title}}"><figcaption>{{.Title}}</figcaption></figure>
{{end}}
</body></html>
`))

// WriteHTML writes the report's page: the experiment's metadata, the
// summary's tables, every run with its fidelity (runs that missed it in
// red) and the plots, linked by their file names (the page goes into the
// same directory as the plots).
func WriteHTML(w io.Writer, res *Results, s *Summary, plots []Plot) error {
	d := pageData{Results: res, Summary: s, Plots: plots}
	for _, v := range s.Variants {
		d.Failed += len(v.Failed)
		d.Flagged += len(v.Flagged)
	}
	d.Settings = settingRows(res.Meta.Settings)
	var b strings.Builder
	if err := page.Execute(&b, d); err != nil {
		return fmt.Errorf("report: page: %w", err)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// settingRows are the runner's settings as the page's rows.
func settingRows(st results.Settings) [][2]string {
	rows := [][2]string{
		{"repetitions", strconv.Itoa(st.Repetitions)},
		{"runs", strconv.Itoa(st.Runs)},
	}
	for _, d := range st.Dimensions {
		rows = append(rows, [2]string{d.Name, strings.Join(d.Values, ", ")})
	}
	if st.Timeout > 0 {
		rows = append(rows, [2]string{"timeout", st.Timeout.String()})
	}
	if st.Events != "" {
		rows = append(rows, [2]string{"events", st.Events})
	}
	return rows
}
