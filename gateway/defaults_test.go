package gateway_test

import (
	"testing"

	"github.com/dlgate/dlgate/config"
	"github.com/dlgate/dlgate/gateway"
)

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
