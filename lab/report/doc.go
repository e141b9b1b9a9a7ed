// Package report reads the results directory of a lab experiment (meta.json,
// runs.jsonl, records.jsonl) and summarises it: per variant and metric the
// median with a distribution-free 95 % confidence interval, as a text
// table and summary.json; plots made with gonum.org/v1/plot; and a
// self-contained HTML page with the experiment's metadata, the table, the
// emulator's fidelity per run and the plots. docs/lab.md ("Reports") says
// what each number means.
package report
