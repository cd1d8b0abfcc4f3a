// Package civil parses the text forms of dates and times of day (the
// proleptic Gregorian calendar, as PostgreSQL and RFC 3339 write them) into
// days and nanoseconds, on bytes, without allocating.
package civil

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// Digits parses the first n bytes of b as a decimal number.
func Digits(b []byte, n int) (int64, bool) {
	if len(b) < n {
		return 0, false
	}
	var v int64
	for _, c := range b[:n] {
		if !isDigit(c) {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

func isLeap(y int64) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

// DaysIn returns the number of days of month m of year y.
func DaysIn(y, m int64) int64 {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// DaysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian
// date.
func DaysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// Date parses "YYYY-MM-DD" at the start of b into days since the epoch.
func Date(b []byte) (days int64, ok bool) {
	if len(b) < 10 || b[4] != '-' || b[7] != '-' {
		return 0, false
	}
	y, ok1 := Digits(b, 4)
	m, ok2 := Digits(b[5:], 2)
	d, ok3 := Digits(b[8:], 2)
	if !ok1 || !ok2 || !ok3 || m < 1 || m > 12 || d < 1 || d > DaysIn(y, m) {
		return 0, false
	}
	return DaysFromCivil(y, m, d), true
}

// Clock parses "HH:MM:SS" with an optional fraction at the start of b
// and returns the nanoseconds since midnight and the bytes consumed.
func Clock(b []byte) (nanos int64, n int, ok bool) {
	if len(b) < 8 || b[2] != ':' || b[5] != ':' {
		return 0, 0, false
	}
	h, ok1 := Digits(b, 2)
	mi, ok2 := Digits(b[3:], 2)
	s, ok3 := Digits(b[6:], 2)
	if !ok1 || !ok2 || !ok3 || h > 23 || mi > 59 || s > 59 {
		return 0, 0, false
	}
	nanos = ((h*60+mi)*60 + s) * 1e9
	n = 8
	if n < len(b) && b[n] == '.' {
		n++
		start := n
		scale := int64(1e8)
		for n < len(b) && isDigit(b[n]) {
			nanos += int64(b[n]-'0') * scale // digits past nanoseconds add 0
			scale /= 10
			n++
		}
		if n == start {
			return 0, 0, false
		}
	}
	return nanos, n, true
}
