package main

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dlgate/dlgate/config"
	"github.com/dlgate/dlgate/ledger/sqlcore"
	"github.com/dlgate/dlgate/webhook"
)

// newWebhooks returns the deliverer of webhook events when
// GATEWAY_WEBHOOK_URL is set (SPEC §6), and from then on every change
// writes its event in its own transaction; nil when webhooks are off.
// Every process of a deployment should have the same setting: a process
// without it writes no events for the changes it makes.
func newWebhooks(cfg *config.Config, db *sqlcore.DB, reg prometheus.Registerer, log *slog.Logger) (*webhook.Worker, error) {
	if cfg.WebhookURL == "" {
		return nil, nil
	}
	key, err := cfg.WebhookKey()
	if err != nil {
		return nil, err // Load validated it already
	}
	w, err := webhook.New(webhook.Options{
		Outbox: db, URL: cfg.WebhookURL, Key: key, MaxAge: cfg.WebhookMaxAge,
		Logger: log, Registerer: reg, UserAgent: "dlgate-webhook/" + buildVersion(),
	})
	if err != nil {
		return nil, err
	}
	db.Webhooks = true
	return w, nil
}

// runWebhooks runs w until ctx ends; the channel closes when it has
// returned (at once when w is nil).
func runWebhooks(ctx context.Context, w *webhook.Worker) <-chan struct{} {
	done := make(chan struct{})
	if w == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	return done
}
