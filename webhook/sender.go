package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// attempt is the outcome of one POST.
type attempt struct {
	result string // ResultSuccess, ResultHTTPError or ResultNetworkError
	status int    // the HTTP status, 0 without an answer
	// reason says why it failed, for the outbox row and the log; it
	// never contains the receiver's URL, which may carry a credential.
	reason string
	// retryAfter is the receiver's Retry-After, 0 when absent.
	retryAfter time.Duration
}

// send POSTs e to the receiver, signed for this attempt, within the
// delivery timeout. Any 2xx is success; anything else, redirects
// included, is a failure (Standard Webhooks, "Delivery success and
// failure").
func (w *Worker) send(ctx context.Context, e ledger.OutboxEvent) attempt {
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.opts.URL, bytes.NewReader(e.Body))
	if err != nil {
		return attempt{result: ResultNetworkError, reason: "bad request: " + err.Error()}
	}
	ts := w.opts.Now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", w.opts.UserAgent)
	req.Header.Set(HeaderID, e.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderSignature, w.signer.Sign(e.ID, ts, e.Body))
	resp, err := w.opts.Client.Do(req)
	if err != nil {
		return attempt{result: ResultNetworkError, reason: networkReason(ctx, err)}
	}
	defer resp.Body.Close()
	// Read a little of the answer so the connection can be reused; the
	// receiver has nothing to tell us in it, and a 2xx whose body breaks
	// off is still an answer.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) //nolint:errcheck // see above
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return attempt{result: ResultHTTPError, status: resp.StatusCode,
			reason: "HTTP " + strconv.Itoa(resp.StatusCode), retryAfter: retryAfter(resp.Header.Get("Retry-After"), w.opts.Now())}
	}
	return attempt{result: ResultSuccess, status: resp.StatusCode}
}

// networkReason describes a failed exchange without the URL that
// net/http puts in its errors.
func networkReason(ctx context.Context, err error) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "timeout: no answer within the delivery timeout"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	if len(msg) > 300 {
		msg = msg[:300]
	}
	return msg
}

// retryAfter reads a Retry-After header (RFC 9110 §10.2.3): seconds or an
// HTTP date. 0 when absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func (a attempt) String() string {
	if a.result == ResultSuccess {
		return fmt.Sprintf("success (HTTP %d)", a.status)
	}
	return a.result + ": " + a.reason
}
