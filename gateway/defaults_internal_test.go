package gateway

import (
	"log/slog"
	"testing"

	"github.com/dlgate/dlgate/config"
)

// The warm sessions take their knobs from the options, whose defaults are
// config's (config.Sessions), applied once: gateway/warm keeps no defaults
// of its own.
func TestTheWarmSessionsTakeConfigsDefaults(t *testing.T) {
	w := routingServer(t, slog.DiscardHandler).warm.Config
	for _, d := range []struct {
		name       string
		warm, conf any
	}{
		{"WarmIdle", w.Idle, config.DefaultWarmIdle},
		{"WarmRowTTL", w.RowTTL, config.DefaultWarmRowTTL},
		{"WarmBudget", w.Keep, int64(config.DefaultWarmBudget)},
		{"SlotIdle", w.SlotIdle, config.DefaultSlotIdle},
		{"SlotWait", w.SlotWait, config.DefaultSlotWait},
		{"Chunk", w.Chunk, int64(config.DefaultChunk)},
		{"ReportEvery", w.ReportEvery, config.DefaultReportEvery},
	} {
		if d.warm != d.conf {
			t.Errorf("the warm sessions' %s = %v, config.Default%s = %v", d.name, d.warm, d.name, d.conf)
		}
	}
}
