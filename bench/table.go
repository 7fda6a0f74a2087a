package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// writeTable prints the figures and, below, their ratios to tickbus-shm.
func writeTable(w io.Writer, results []*Result, cfg Config) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	lat := "latency"
	if cfg.PingPong {
		lat = "round trip"
	}
	fmt.Fprintf(tw, "case\t%s p50\tp90\tp99\tp99.9\tp99.99\tmax\tsamples\tticks/s\tbatched/s\tCPU s/M ticks\tlost\tcores\t\n", lat)
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t\n", r.Case,
			fmtNs(r.P50), fmtNs(r.P90), fmtNs(r.P99), fmtNs(r.P999), fmtNs(r.P9999), fmtNs(r.Max), r.Samples,
			fmtRate(r.Throughput), fmtRate(r.BatchedThroughput), fmtFloat(r.CPUPerMillion, "%.3f"), r.Lost, r.Cores)
	}
	_ = tw.Flush()

	fmt.Fprintln(w, "\nratio to tickbus-shm (latency, CPU: lower is better; throughput: higher is better)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "case\tp50\tp90\tp99\tp99.9\tp99.99\tmax\tticks/s\tbatched/s\tCPU/M\t\n")
	for _, r := range results {
		var cells []string
		for _, f := range figures {
			cells = append(cells, fmtFloat(r.Ratio[f.key], "×%.3g"))
		}
		fmt.Fprintf(tw, "%s\t%s\t\n", r.Case, strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
	for _, r := range results {
		if r.Note != "" {
			fmt.Fprintf(w, "%s: %s\n", r.Case, r.Note)
		}
	}
}

func fmtNs(v *int64) string {
	if v == nil {
		return "-"
	}
	ns := float64(*v)
	switch {
	case ns < 1e3:
		return fmt.Sprintf("%.0fns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%.3gµs", ns/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%.3gms", ns/1e6)
	}
	return fmt.Sprintf("%.3gs", ns/1e9)
}

func fmtRate(v *float64) string {
	if v == nil {
		return "-"
	}
	switch {
	case *v >= 1e6:
		return fmt.Sprintf("%.3gM", *v/1e6)
	case *v >= 1e3:
		return fmt.Sprintf("%.3gk", *v/1e3)
	}
	return fmt.Sprintf("%.3g", *v)
}

func fmtFloat(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}
