package gateway_test

import (
	"testing"

	"github.com/dlgate/dlgate/config"
	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/gateway/warm"
)

// config holds the defaults of the warm-session knobs (config.Sessions);
// gateway/warm keeps constants of the same values, which the end-to-end
// tests read: they must not drift apart.
func TestTheWarmSessionDefaultsAreConfigs(t *testing.T) {
	for _, d := range []struct {
		name       string
		warm, conf any
	}{
		{"WarmIdle", warm.DefaultWarmIdle, config.DefaultWarmIdle},
		{"WarmRowTTL", warm.DefaultWarmRowTTL, config.DefaultWarmRowTTL},
		{"WarmBudget", int64(warm.DefaultWarmBudget), int64(config.DefaultWarmBudget)},
		{"SlotIdle", warm.DefaultSlotIdle, config.DefaultSlotIdle},
		{"SlotWait", warm.DefaultSlotWait, config.DefaultSlotWait},
	} {
		if d.warm != d.conf {
			t.Errorf("warm.Default%s = %v, config.Default%s = %v", d.name, d.warm, d.name, d.conf)
		}
	}
}

// A zero option is config's default, as the setting's default would be.
func TestZeroOptionsTakeConfigsDefaults(t *testing.T) {
	h := MustHarness(t)
	o := h.Server.Options
	var want gateway.Options
	config.ApplyDefaults(&want.Timeouts, &want.Sessions, &want.UploadLimits)
	if o.Timeouts != want.Timeouts || o.Sessions != want.Sessions || o.UploadLimits != want.UploadLimits {
		t.Errorf("options after New = %+v, %+v, %+v; want config's defaults", o.Timeouts, o.Sessions, o.UploadLimits)
	}
	if o.BodyTimeout != config.DefaultBodyTimeout || o.SlotLease != config.DefaultSlotLease || o.UploadExpiry != config.DefaultUploadExpiry ||
		o.Affinity != config.DefaultSessionAffinity {
		t.Errorf("BodyTimeout %v, SlotLease %v, UploadExpiry %v, Affinity %q; want the settings' defaults", o.BodyTimeout, o.SlotLease, o.UploadExpiry, o.Affinity)
	}
}
