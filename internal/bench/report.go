package main

import (
	"fmt"
	"io"
	"slices"
)

// report prints the results as Markdown tables.
func report(w io.Writer, r *results) {
	mbps := func(bytes int64, secs float64) float64 { return float64(bytes) / 1e6 / secs }
	if len(r.Throughput) > 0 {
		fmt.Fprintln(w, "\nThroughput (generator source -> local Delta table; limit = the Parquet writer alone ("+r.Tuning.limitWriterName()+") on the same records from an mmapped IPC file; from IPC = the pipeline with the limit's records as its source)")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| key | rows | partitions | pipeline rows/s | pipeline MB/s | limit rows/s | pipeline/limit | from IPC/limit | CPU µs/row pipeline / limit / generator+stamp / from IPC | limit/pipeline by CPU | Parquet MB |")
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
		var ratios, replays []float64
		for _, t := range r.Throughput {
			fmt.Fprintf(w, "| %s | %d | %d | %.0f | %.0f | %.0f | **%.2f** | **%.2f** | %.2f / %.2f / %.2f / %.2f | %.2f | %.0f |\n", t.Key, t.Rows, t.Partitions,
				t.Pipeline.rowsPerSec(), mbps(t.ArrowBytes, t.Pipeline.Seconds), t.Limit.rowsPerSec(), t.ratio(), t.replayRatio(),
				t.Pipeline.cpuPerRow(), t.Limit.cpuPerRow(), t.GenOnly.cpuPerRow(), t.Replay.cpuPerRow(), t.Limit.CPU/t.Pipeline.CPU, float64(t.Pipeline.OutBytes)/1e6)
			ratios, replays = append(ratios, t.ratio()), append(replays, t.replayRatio())
		}
		fmt.Fprintf(w, "\nMedian over the %d cells: pipeline/limit %.3f, from IPC/limit %.3f\n", len(ratios), median(ratios), median(replays))
	}
	if len(r.Peer) > 0 {
		fmt.Fprintln(w, "\ndelta-rs peer (both read the same mmapped IPC file; bigint key)")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| rows | delta-rs rows/s | sink/delta 1 writer rows/s | sink/delta 2 writers rows/s | cdcsnap/delta-rs (1 writer) | cdcsnap/delta-rs (2 writers) | CPU µs/row delta-rs / sink 1 / sink 2 | CPU sink 2/delta-rs | MB delta-rs / sink |")
		fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
		for _, p := range r.Peer {
			d := float64(p.DeltaRS.Rows) / p.DeltaRS.Seconds
			dcpu := p.DeltaRS.CPU * 1e6 / float64(p.DeltaRS.Rows)
			s1, s2 := p.Sink[1].rowsPerSec(), p.Sink[2].rowsPerSec()
			fmt.Fprintf(w, "| %d | %.0f | %.0f | %.0f | %.2f | **%.2f** | %.2f / %.2f / %.2f | **%.2f** | %.0f / %.0f |\n", p.Rows, d, s1, s2, s1/d, s2/d,
				dcpu, p.Sink[1].cpuPerRow(), p.Sink[2].cpuPerRow(), p.Sink[2].cpuPerRow()/dcpu,
				float64(p.DeltaRS.Bytes)/1e6, float64(p.Sink[2].OutBytes)/1e6)
		}
		fmt.Fprintf(w, "\n(deltalake %s, pyarrow %s)\n", r.Peer[0].DeltaRS.Deltalake, r.Peer[0].DeltaRS.Pyarrow)
	}
	if len(r.Memory) > 0 {
		fmt.Fprintln(w, "\nMemory (pipeline, bigint key, one fresh child process per row)")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| rows | partitions | seconds | peak heap MiB | peak RSS (VmHWM) MiB | RSS vs smallest size |")
		fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | ---: |")
		base := map[int]uint64{}
		for _, m := range r.Memory {
			if _, ok := base[m.Partitions]; !ok {
				base[m.Partitions] = m.VmHWM
			}
			fmt.Fprintf(w, "| %d | %d | %.1f | %.0f | %.0f | %.2fx |\n", m.Rows, m.Partitions, m.Seconds, mib(m.PeakHeap), mib(m.VmHWM),
				float64(m.VmHWM)/float64(base[m.Partitions]))
		}
	}
	if len(r.Planning) > 0 {
		fmt.Fprintln(w, "\nPlanning cost (fake DB counters; key (company int, id bigint); full key pass = an NTILE plan reading every key)")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| rows | companies | partitions | seeks | keys read (keyset) | keys read (full pass) | keyset/full | rows examined / rows in ranges | worst range extra rows |")
		fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
		for _, p := range r.Planning {
			fmt.Fprintf(w, "| %d | %d | %d | %d | %d | %d | %.3f | %d / %d | %d |\n", p.Rows, p.Companies, p.Partitions, p.Seeks,
				p.KeysKeyset, p.KeysFullPass, float64(p.KeysKeyset)/float64(p.KeysFullPass), p.RowsExamined, p.RowsInRanges, p.WorstRangeExtra)
		}
	}
	if len(r.Allocs) > 0 {
		fmt.Fprintln(w, "\nHeap allocations (runtime.MemStats, one in-process run each)")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| run | rows | allocs | allocs/row | allocs per 8192-row batch | bytes allocated/row |")
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: |")
		for _, a := range r.Allocs {
			fmt.Fprintf(w, "| %s | %d | %d | %.4f | %.1f | %.0f |\n", a.What, a.Rows, a.Allocs, a.AllocPerRow, a.AllocPerBtch, a.BytesPerRow)
		}
	}
	fmt.Fprintf(w, "\nrun time: %.0f s\n", r.Seconds)
}

// median returns the median of xs (the mean of the middle two for an even
// count); xs is sorted in place.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
