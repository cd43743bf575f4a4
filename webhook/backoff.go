package webhook

import "time"

// Backoff is the retry schedule of a failed delivery (SPEC §6): First
// after the first failure, doubling after each further one, never more
// than Max, each delay jittered.
type Backoff struct {
	First time.Duration
	Max   time.Duration
}

// DefaultBackoff retries within a second, then after 2, 4, 8 s … and
// hourly once the doubling reaches an hour (the 13th retry on).
var DefaultBackoff = Backoff{First: time.Second, Max: time.Hour}

// Delay returns the wait after the attempts-th failed attempt (1 for the
// first): First doubled attempts-1 times and capped at Max, then moved to
// a point in its upper half by r, a uniform number in [0, 1). Keeping the
// lower half empty keeps the doubling; the jitter spreads the retries of
// events that failed together (a receiver's outage) so they do not all
// come back in the same instant.
func (b Backoff) Delay(attempts int, r float64) time.Duration {
	d := b.First
	for i := 1; i < attempts && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	return d/2 + time.Duration(r*float64(d/2))
}
