// promparse: reads a Prometheus text exposition (0.0.4) on stdin with
// Prometheus's own parser (github.com/prometheus/common/expfmt.TextParser,
// Debian's golang-github-prometheus-common-dev) and prints the families as
// JSON on stdout: {"name": {"type": "COUNTER", "help": "...", "metrics":
// [{"labels": {...}, "value": 1}, ... or "buckets": {"0.001": 3, ...},
// "sum": s, "count": n}]}}. A parse error: the message on stderr, exit 1.
package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

type metric struct {
	Labels  map[string]string `json:"labels"`
	Value   *float64          `json:"value,omitempty"`
	Buckets map[string]uint64 `json:"buckets,omitempty"`
	Sum     *float64          `json:"sum,omitempty"`
	Count   *uint64           `json:"count,omitempty"`
}

type family struct {
	Type    string   `json:"type"`
	Help    string   `json:"help"`
	Metrics []metric `json:"metrics"`
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = -1 // JSON has no NaN or Inf; none is expected on kdp's page
	}
	return &v
}

func main() {
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promparse:", err)
		os.Exit(1)
	}
	out := map[string]family{}
	for name, f := range fams {
		fam := family{Type: f.GetType().String(), Help: f.GetHelp()}
		for _, m := range f.Metric {
			x := metric{Labels: map[string]string{}}
			for _, l := range m.Label {
				x.Labels[l.GetName()] = l.GetValue()
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				x.Value = finite(m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				x.Value = finite(m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				x.Value = finite(m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				x.Buckets = map[string]uint64{}
				for _, b := range h.Bucket {
					x.Buckets[strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)] = b.GetCumulativeCount()
				}
				x.Sum = finite(h.GetSampleSum())
				c := h.GetSampleCount()
				x.Count = &c
			}
			fam.Metrics = append(fam.Metrics, x)
		}
		out[name] = fam
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "promparse:", err)
		os.Exit(1)
	}
}
