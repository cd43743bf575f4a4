// Package webhook delivers the webhook events of the ledger's outbox to
// one HTTP receiver (SPEC §6): at least once, one at a time per link and
// in order, retried with exponential backoff and jitter until the maximum
// age, signed per the Standard Webhooks specification
// (https://www.standardwebhooks.com). Every gateway process runs a
// Worker; they share the work through the outbox's leases. Nothing here
// runs on a request's way: a claim only writes its event row.
package webhook

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dlgate/dlgate/config"
	"github.com/dlgate/dlgate/ledger"
)

// Defaults of Options.
const (
	DefaultMaxAge  = config.DefaultWebhookMaxAge
	DefaultTimeout = 10 * time.Second
	DefaultPoll    = time.Second
	DefaultBatch   = 16
	DefaultKeep    = 24 * time.Hour
)

// housekeepEvery is how often a worker expires events past the maximum
// age, purges finished ones and reads the outbox's age for the gauge.
const housekeepEvery = 5 * time.Second

// Options configure a Worker. Outbox, URL and Key are required.
type Options struct {
	Outbox ledger.Outbox
	// URL is the receiver (GATEWAY_WEBHOOK_URL).
	URL string
	// Key is the signing secret's bytes: the base64 after "whsec_" of
	// GATEWAY_WEBHOOK_SECRET, decoded.
	Key []byte
	// MaxAge is how long an event is retried before it is given up
	// (GATEWAY_WEBHOOK_MAX_AGE, default 72 h).
	MaxAge time.Duration
	// Timeout bounds one delivery attempt, answer included (default
	// 10 s). An event is leased for Timeout plus 5 s: a process that dies
	// mid-delivery leaves its events to the others after that.
	Timeout time.Duration
	// Backoff is the retry schedule (default DefaultBackoff).
	Backoff Backoff
	// Poll is how long an idle worker waits before looking for due
	// events again (default 1 s).
	Poll time.Duration
	// Batch is how many events one round claims and sends at once
	// (default 16); a link never has two in one round.
	Batch int
	// Keep is how long delivered and given-up events stay in the outbox
	// for inspection before they are purged (default 24 h).
	Keep time.Duration
	// Client sends the requests (default: its own transport, no
	// redirects followed).
	Client *http.Client
	Logger *slog.Logger
	// Registerer gets the worker's metrics (nil: not registered).
	Registerer prometheus.Registerer
	// Holder names this process in the outbox's leases (default
	// host/pid/random).
	Holder string
	// UserAgent of the requests (default "dlgate-webhook").
	UserAgent string
	// Now is the clock of webhook-timestamp (default time.Now).
	Now func() time.Time
	// Rand returns uniform numbers in [0, 1) for the jitter (default
	// math/rand/v2).
	Rand func() float64
}

// Worker delivers the outbox's events until its Run ends.
type Worker struct {
	opts    Options
	signer  *Signer
	lease   time.Duration
	log     *slog.Logger
	metrics *metrics
}

// New checks opts and returns a Worker. Errors: a missing outbox, a URL
// that is not absolute http(s), a key of the wrong length, metrics that
// cannot be registered.
func New(opts Options) (*Worker, error) {
	if opts.Outbox == nil {
		return nil, errors.New("webhook: an outbox is required")
	}
	if u, err := url.Parse(opts.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("webhook: the URL must be an absolute http or https URL")
	}
	signer, err := NewSigner(opts.Key)
	if err != nil {
		return nil, err
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Backoff.First <= 0 || opts.Backoff.Max < opts.Backoff.First {
		opts.Backoff = DefaultBackoff
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Batch <= 0 {
		opts.Batch = DefaultBatch
	}
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	if opts.Client == nil {
		opts.Client = &http.Client{
			Transport: http.DefaultTransport.(*http.Transport).Clone(),
			// A redirect is a failure: the operator should fix the URL
			// rather than have every event bounce.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Holder == "" {
		opts.Holder = defaultHolder()
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "dlgate-webhook"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Rand == nil {
		opts.Rand = rand.Float64
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("webhook: metrics: %w", err)
	}
	return &Worker{opts: opts, signer: signer, lease: opts.Timeout + 5*time.Second,
		log: opts.Logger.With("component", "webhook"), metrics: m}, nil
}

// defaultHolder names this process: host, pid and a random part, so that
// a restarted process with a recycled pid is someone else.
func defaultHolder() string {
	host, _ := os.Hostname()
	if len(host) > 200 {
		host = host[:200]
	}
	b := make([]byte, 4)
	cryptorand.Read(b) //nolint:errcheck // never fails
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b))
}

// Holder is the name this worker's leases carry.
func (w *Worker) Holder() string { return w.opts.Holder }

// Run delivers events until ctx ends, then lets go of the events it was
// sending so another process takes them at once, and returns.
func (w *Worker) Run(ctx context.Context) {
	var lastHousekeep time.Time
	for {
		if time.Since(lastHousekeep) >= housekeepEvery {
			w.housekeep(ctx)
			lastHousekeep = time.Now()
		}
		n, err := w.Round(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			w.log.WarnContext(ctx, "webhook: cannot claim events", "err", err)
		}
		if n > 0 && err == nil {
			// Delivering an event may have made its link's next one due.
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.opts.Poll):
		}
	}
}

// Round claims one batch of due events, sends them concurrently (they
// belong to different links) and reports each outcome to the outbox. It
// returns how many events it claimed.
func (w *Worker) Round(ctx context.Context) (int, error) {
	events, err := w.opts.Outbox.EventClaim(ctx, w.opts.Holder, w.opts.Batch, w.lease)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, e := range events {
		wg.Go(func() { w.deliver(ctx, e) })
	}
	wg.Wait()
	return len(events), nil
}

// deliver makes one attempt at e and records it.
func (w *Worker) deliver(ctx context.Context, e ledger.OutboxEvent) {
	log := w.log.With("event_id", e.ID, "type", e.Type, "link_id", e.LinkID, "attempt", e.Attempts)
	start := time.Now()
	a := w.send(ctx, e)
	// The outcome is recorded even when ctx ended meanwhile.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var err error
	switch {
	case a.result == ResultSuccess:
		w.metrics.deliveries.WithLabelValues(ResultSuccess).Inc()
		log.DebugContext(ctx, "webhook delivered", "status", a.status, "duration", time.Since(start))
		err = w.opts.Outbox.EventMarkDelivered(rctx, e.Seq, w.opts.Holder)
	case ctx.Err() != nil:
		// Shutting down: not the receiver's failure. Let go of the event
		// so another process sends it now rather than after the lease.
		err = w.opts.Outbox.EventMarkFailed(rctx, e.Seq, w.opts.Holder, "interrupted: the gateway process stopped", 0)
	default:
		w.metrics.deliveries.WithLabelValues(a.result).Inc()
		delay := w.opts.Backoff.Delay(e.Attempts, w.opts.Rand())
		if a.retryAfter > delay {
			delay = min(a.retryAfter, w.opts.Backoff.Max)
		}
		log.InfoContext(ctx, "webhook delivery failed; will retry", "result", a.result, "status", a.status,
			"reason", a.reason, "retry_in", delay, "duration", time.Since(start))
		err = w.opts.Outbox.EventMarkFailed(rctx, e.Seq, w.opts.Holder, a.reason, delay)
	}
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		// The lease lapsed and another process took the event: it sends
		// it again (at least once).
		log.DebugContext(ctx, "webhook event taken over by another process")
	case err != nil:
		log.WarnContext(ctx, "webhook: cannot record the delivery outcome; the event will be sent again", "err", err)
	}
}

// housekeep gives up events past the maximum age, purges finished ones
// and sets the age gauge.
func (w *Worker) housekeep(ctx context.Context) {
	for {
		n, err := w.opts.Outbox.EventExpire(ctx, w.opts.MaxAge, 500)
		if err != nil {
			if ctx.Err() == nil {
				w.log.WarnContext(ctx, "webhook: cannot expire events", "err", err)
			}
			break
		}
		if n > 0 {
			w.metrics.deliveries.WithLabelValues(ResultExpired).Add(float64(n))
			w.log.WarnContext(ctx, "webhook events given up after the maximum age", "count", n, "max_age", w.opts.MaxAge)
		}
		if n < 500 {
			break
		}
	}
	for {
		n, err := w.opts.Outbox.EventPurge(ctx, w.opts.Keep, 500)
		if err != nil {
			if ctx.Err() == nil {
				w.log.WarnContext(ctx, "webhook: cannot purge finished events", "err", err)
			}
			break
		}
		if n < 500 {
			break
		}
	}
	if age, err := w.opts.Outbox.OutboxAge(ctx); err == nil {
		w.metrics.oldest.Set(age.Seconds())
	} else if ctx.Err() == nil {
		w.log.WarnContext(ctx, "webhook: cannot read the outbox's age", "err", err)
	}
}
