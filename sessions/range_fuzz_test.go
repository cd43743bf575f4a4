package sessions

import (
	"errors"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func FuzzParseRange(f *testing.F) {
	for _, test := range parseRangeTests {
		// Keep the corpus small: the huge defensive-limit cases are still
		// run by TestParseRange.
		if len(test.s) <= 512 {
			f.Add(test.s, test.size)
		}
	}
	for _, seed := range []struct {
		s    string
		size int64
	}{
		{"bytes=0-0,1-1,2-2,3-3,4-4,5-5,6-6,7-7,8-8,9-9,10-10,11-11,12-12,13-13,14-14,15-15,16-16", 1 << 20},
		{"bytes=0-0,2-2,4-4,6-6,8-8,10-10,12-12,14-14,16-16,18-18,20-20,22-22,24-24,26-26,28-28,30-30,32-32", 1 << 20},
		{"bytes=-9223372036854775807", 9223372036854775807},
		{"bytes=9223372036854775806-", 9223372036854775807},
		{"bytes=0-9223372036854775807,-1", 9223372036854775807},
		{"bytes=100-200, 150-250 ,\t-50,,", 1000},
		{"bytes=0-0", -9223372036854775808},
		{"BYTES=1-1,3-3,5-", 6},
		{"bytes=1-1,,,3-3", 4},
		{"bytes=\t -0 ,\t", 7},
		{"bytes=500-599,0-99", 1 << 20},
		{"bytes=0-1234567890123456789012345678901234567890", 1 << 20},
		{"bytes=18446744073709551616-", 1 << 20},
		{"bytes=-99999999999999999999999", 1 << 20},
		{"bytes=99999999999999999999-99999999999999999998", 10},
		{"bytes=0-9,5-2", 10},
		{"bytes=-1,0-0", 0},
		{"bytes=8-,0-1,4-5,2-3", 10},
	} {
		f.Add(seed.s, seed.size)
	}

	f.Fuzz(func(t *testing.T, header string, size int64) {
		got, err := ParseRange(header, size)
		want, wantErr := referenceParseRange(header, size)
		if !errors.Is(err, wantErr) || !slices.Equal(got, want) {
			t.Fatalf("ParseRange(%q, %d) = %v, %v; want %v, %v", header, size, got, err, want, wantErr)
		}
		if header == "" {
			if got != nil || err != nil {
				t.Fatalf("ParseRange(%q, %d) = %v, %v; want nil, nil", header, size, got, err)
			}
			return
		}
		if err != nil {
			if got != nil {
				t.Fatalf("ParseRange(%q, %d) = %v, %v; want no ranges with an error", header, size, got, err)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnsatisfiable) && !errors.Is(err, ErrTooManyRanges) {
				t.Fatalf("ParseRange(%q, %d) returned unknown error %v", header, size, err)
			}
			return
		}
		if got == nil && size <= 0 {
			return // a suffix-range on an empty representation: serve it all
		}
		if len(got) == 0 || len(got) > MaxRanges {
			t.Fatalf("ParseRange(%q, %d) = %v: want 1 to %d ranges", header, size, got, MaxRanges)
		}
		for i, r := range got {
			if r.Start < 0 || r.Length < 1 || r.Start > size-r.Length {
				t.Fatalf("ParseRange(%q, %d) = %v: range %d outside [0, %d)", header, size, got, i, size)
			}
			// In any order, but neither overlapping nor adjacent.
			for j, q := range got[:i] {
				if r.Start <= q.Start+q.Length && q.Start <= r.Start+r.Length {
					t.Fatalf("ParseRange(%q, %d) = %v: ranges %d and %d not coalesced", header, size, got, j, i)
				}
			}
			cr := r.ContentRange(size)
			wantCR := "bytes " + strconv.FormatInt(r.Start, 10) + "-" + strconv.FormatInt(r.Start+r.Length-1, 10) + "/" + strconv.FormatInt(size, 10)
			if cr != wantCR {
				t.Fatalf("%v.ContentRange(%d) = %q, want %q", r, size, cr, wantCR)
			}
		}
	})
}

var (
	// The whole field value once OWS is trimmed; (?s) lets .* see CR and LF.
	refRangeHeader = regexp.MustCompile(`(?s)^[ \t]*[Bb][Yy][Tt][Ee][Ss]=(.*?)[ \t]*$`)
	refEmptySpec   = regexp.MustCompile(`^[ \t]*$`)
	refIntRange    = regexp.MustCompile(`^[ \t]*([0-9]+)[ \t]*-[ \t]*([0-9]*)[ \t]*$`)
	refSuffixRange = regexp.MustCompile(`^[ \t]*-[ \t]*([0-9]+)[ \t]*$`)
)

// referenceParseRange is a deliberately naive second implementation of
// ParseRange for the fuzzer to compare against: regular expressions for the
// grammar, math/big for the numbers, coverage computed by coordinate
// compression instead of sorting and merging, and each covered run placed
// by the first spec (in request order) that it contains.
func referenceParseRange(header string, size int64) ([]Range, error) {
	if header == "" {
		return nil, nil
	}
	m := refRangeHeader.FindStringSubmatch(header)
	if m == nil {
		return nil, ErrMalformed
	}
	set := m[1]
	if len(header) > 8192 || len(strings.Split(set, ",")) > 1000 {
		return nil, ErrTooManyRanges
	}
	size = max(size, 0)
	bigSize := big.NewInt(size)
	num := func(s string) *big.Int {
		n, ok := new(big.Int).SetString(s, 10)
		if !ok {
			panic("not a number: " + s)
		}
		return n
	}
	type interval struct {
		start, end int64 // [start, end)
		index      int   // position among the satisfiable specs
	}
	var ivs []interval
	specs, emptySatisfiable := 0, false
	for _, spec := range strings.Split(set, ",") {
		if refEmptySpec.MatchString(spec) {
			continue
		}
		specs++
		if m := refSuffixRange.FindStringSubmatch(spec); m != nil {
			n := num(m[1])
			switch {
			case n.Sign() == 0:
			case size == 0:
				emptySatisfiable = true
			case n.Cmp(bigSize) >= 0:
				ivs = append(ivs, interval{0, size, len(ivs)})
			default:
				ivs = append(ivs, interval{size - n.Int64(), size, len(ivs)})
			}
			continue
		}
		m := refIntRange.FindStringSubmatch(spec)
		if m == nil {
			return nil, ErrInvalid
		}
		first := num(m[1])
		last := new(big.Int).Sub(bigSize, big.NewInt(1))
		if m[2] != "" {
			l := num(m[2])
			if l.Cmp(first) < 0 {
				return nil, ErrInvalid
			}
			if l.Cmp(last) < 0 {
				last = l
			}
		}
		if first.Cmp(bigSize) < 0 {
			ivs = append(ivs, interval{first.Int64(), last.Int64() + 1, len(ivs)})
		}
	}
	if specs == 0 {
		return nil, ErrInvalid
	}
	if emptySatisfiable {
		return nil, nil
	}
	if len(ivs) == 0 {
		return nil, ErrUnsatisfiable
	}

	var points []int64
	for _, iv := range ivs {
		points = append(points, iv.start, iv.end)
	}
	slices.Sort(points)
	points = slices.Compact(points)
	var out []Range
	open := false
	for k := 0; k+1 < len(points); k++ {
		lo, hi := points[k], points[k+1]
		covered := slices.ContainsFunc(ivs, func(iv interval) bool { return iv.start <= lo && hi <= iv.end })
		switch {
		case covered && open:
			out[len(out)-1].Length += hi - lo
		case covered:
			out = append(out, Range{lo, hi - lo})
			open = true
		default:
			open = false
		}
	}
	if len(out) > MaxRanges {
		return nil, ErrTooManyRanges
	}
	// Every spec lies within exactly one covered run; a run goes where the
	// earliest of its specs was requested.
	place := func(r Range) int {
		for _, iv := range ivs {
			if r.Start <= iv.start && iv.end <= r.Start+r.Length {
				return iv.index
			}
		}
		panic("a covered run without a spec")
	}
	slices.SortStableFunc(out, func(a, b Range) int { return place(a) - place(b) })
	return out, nil
}
