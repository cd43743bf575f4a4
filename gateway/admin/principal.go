package admin

import (
	"context"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/ledger"
)

// Principal is who an admin request authenticated as.
type Principal struct {
	KeyID   string // ledger.BootstrapKeyID for the admin token
	KeyName string
	Scopes  apikey.Scopes
	// Bootstrap: the admin token, which holds every scope and alone may
	// use the bootstrap routes.
	Bootstrap bool
}

type principalKey struct{}

// PrincipalOf returns the principal of an authenticated admin request.
func PrincipalOf(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// WithPrincipal returns ctx carrying p as the authenticated caller, as
// RequireScope leaves it for the handlers: the console puts its session's
// key there before it calls a core (KeyCreate reads it).
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalOfKey is who a console session's key is.
func PrincipalOfKey(k ledger.Key) Principal {
	return Principal{KeyID: k.ID, KeyName: k.Name, Scopes: k.Scopes, Bootstrap: k.ID == ledger.BootstrapKeyID}
}
