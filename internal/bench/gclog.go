package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"time"
)

// gcPause is one stop-the-world pause of the broker's JVM: it ended at end
// (Unix nanoseconds) and lasted dur.
type gcPause struct {
	end int64
	dur time.Duration
}

// readGCPauses reads the pauses of a GC log written with
// -Xlog:gc:file=PATH:utctime, whose lines look like
//
//	[2026-12-06T08:12:33.456+0000] GC(7) Pause Young (Normal) (G1 Evacuation Pause) 691M->203M(1024M) 39.347ms
//
// JDK 17 logs a pause when it ends. Lines of any other shape are skipped.
func readGCPauses(path string) ([]gcPause, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []gcPause
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := parseGCPause(sc.Text()); ok {
			out = append(out, p)
		}
	}
	return out, sc.Err()
}

// parseGCPause reads one line of readGCPauses.
func parseGCPause(line string) (gcPause, bool) {
	stamp, rest, ok := strings.Cut(strings.TrimPrefix(line, "["), "]")
	if !ok || !strings.Contains(rest, " Pause ") {
		return gcPause{}, false
	}
	at, err := time.Parse("2006-01-02T15:04:05.000-0700", stamp)
	if err != nil {
		return gcPause{}, false
	}
	i := strings.LastIndexByte(rest, ' ')
	ms, ok := strings.CutSuffix(rest[i+1:], "ms")
	if !ok {
		return gcPause{}, false
	}
	v, err := strconv.ParseFloat(ms, 64)
	if err != nil {
		return gcPause{}, false
	}
	return gcPause{end: at.UnixNano(), dur: time.Duration(v * float64(time.Millisecond))}, true
}

// pausesIn counts the pauses that overlap w, with their sum and the
// longest, in milliseconds.
func pausesIn(ps []gcPause, w window) (n int, sumMs, maxMs float64) {
	for _, p := range ps {
		if p.end < w.from || p.end-int64(p.dur) >= w.to {
			continue
		}
		ms := float64(p.dur) / float64(time.Millisecond)
		n, sumMs, maxMs = n+1, sumMs+ms, max(maxMs, ms)
	}
	return n, sumMs, maxMs
}
