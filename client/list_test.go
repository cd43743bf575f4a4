package client

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestListLinksSendsItsFiltersAsTheQuery(t *testing.T) {
	after := time.Date(2030, 1, 2, 3, 4, 5, 600_000_000, time.FixedZone("x", 3600))
	tests := []struct {
		name    string
		opts    ListOptions
		wantURI string
	}{
		{"NoFilter", ListOptions{}, "/v1/links"},
		{"Every", ListOptions{Cursor: "c_1-", Limit: 50, Account: "a&b", ObjectKey: "docs/a b.pdf", State: "active",
			CreatedAfter: after, CreatedBefore: after.Add(time.Hour)},
			"/v1/links?account=a%26b&created_after=2030-01-02T02%3A04%3A05.6Z&created_before=2030-01-02T03%3A04%3A05.6Z" +
				"&cursor=c_1-&limit=50&object_key=docs%2Fa+b.pdf&state=active"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := MustFakeAPI(t, http.StatusOK, `{"links":[]}`)
			p, err := c.ListLinks(context.Background(), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.onlyRequest(t); got.Method != "GET" || got.URI != tt.wantURI || got.Auth != "Bearer tok" {
				t.Errorf("request = %+v, want GET %s", got, tt.wantURI)
			}
			if len(p.Links) != 0 || p.NextCursor != "" {
				t.Errorf("page = %+v, want empty", p)
			}
		})
	}
}

func TestListLinksDecodesEachLinkAndKeepsItsJSON(t *testing.T) {
	_, c := MustFakeAPI(t, http.StatusOK, `{"links":[`+linkJSON+`,{"id":"second","remaining":0}],"next_cursor":"next-1"}`)
	p, err := c.ListLinks(context.Background(), ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Links) != 2 || p.NextCursor != "next-1" {
		t.Fatalf("page = %+v, want 2 links and the cursor", p)
	}
	if l := p.Links[0]; l.Remaining != 2 || l.Object.Key != "k" || !strings.Contains(string(l.Raw), `"future_field":true`) {
		t.Errorf("first link = %+v (raw %s)", l, l.Raw)
	}
	if l := p.Links[1]; l.ID != "second" || string(l.Raw) != `{"id":"second","remaining":0}` {
		t.Errorf("second link = %+v (raw %s)", l, l.Raw)
	}
}

func TestGrants(t *testing.T) {
	const answer = `{"grants":[{"id":"g2","kind":"session","status":"refunded","account_id":"alice","session_id":"s1",
"client":"curl","created_at":"2030-01-02T03:04:05.000001Z","refunded_at":"2030-01-02T03:05:00Z"},
{"id":"g1","kind":"stream","status":"granted","account_id":null,"session_id":null,"client":"wget",
"created_at":"2030-01-02T03:00:00Z","refunded_at":null,"delivery":{"status":"partial","bytes_acked":500,"coverage":0.5,
"attempts":2,"delivered_at":null,"interrupted_at":"2030-01-02T03:01:00Z","measured":true}}],"next_cursor":"n"}`
	tests := []struct {
		opts    GrantOptions
		wantURI string
	}{
		{GrantOptions{}, "/v1/links/id-1/grants"},
		{GrantOptions{Cursor: "abc", Limit: 2}, "/v1/links/id-1/grants?cursor=abc&limit=2"},
		{GrantOptions{Delivery: "partial"}, "/v1/links/id-1/grants?delivery=partial"},
	}
	for _, tt := range tests {
		f, c := MustFakeAPI(t, http.StatusOK, answer)
		p, err := c.Grants(context.Background(), "id-1", tt.opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.onlyRequest(t); got.Method != "GET" || got.URI != tt.wantURI {
			t.Errorf("request = %+v, want GET %s", got, tt.wantURI)
		}
		if len(p.Grants) != 2 || p.NextCursor != "n" {
			t.Fatalf("page = %+v", p)
		}
		g := p.Grants[0]
		if g.ID != "g2" || g.Kind != "session" || g.Status != "refunded" || g.AccountID != "alice" || g.SessionID != "s1" ||
			g.Client != "curl" || g.CreatedAt.Nanosecond() != 1000 || g.RefundedAt == nil || len(g.Raw) == 0 {
			t.Errorf("first grant = %+v", g)
		}
		if g := p.Grants[1]; g.AccountID != "" || g.RefundedAt != nil {
			t.Errorf("second grant = %+v, want no account and no refund", g)
		}
		if d := p.Grants[1].Delivery; d.Status != "partial" || d.BytesAcked != 500 || d.Coverage != 0.5 || d.Attempts != 2 ||
			d.DeliveredAt != nil || d.InterruptedAt == nil || d.InterruptedAt.Minute() != 1 || !d.Measured {
			t.Errorf("second grant's delivery = %+v", d)
		}
	}
}

func TestAllowanceChanges(t *testing.T) {
	f, c := MustFakeAPI(t, http.StatusOK, `{"changes":[{"add":2,"reason":"ticket 9","created_at":"2030-01-02T03:04:05Z"},{"add":1,"reason":"","created_at":"2030-01-01T00:00:00Z"}]}`)
	got, err := c.AllowanceChanges(context.Background(), "id/1")
	if err != nil {
		t.Fatal(err)
	}
	if r := f.onlyRequest(t); r.Method != "GET" || r.URI != "/v1/links/id%2F1/allowance" {
		t.Errorf("request = %+v", r)
	}
	if len(got) != 2 || got[0].Add != 2 || got[0].Reason != "ticket 9" || got[0].CreatedAt.Day() != 2 || got[1].Add != 1 {
		t.Errorf("changes = %+v", got)
	}
}

func TestListCallsReportAPIErrors(t *testing.T) {
	calls := map[string]func(*Client) error{
		"ListLinks": func(c *Client) error {
			_, err := c.ListLinks(context.Background(), ListOptions{Cursor: "x"})
			return err
		},
		"Grants": func(c *Client) error { _, err := c.Grants(context.Background(), "id", GrantOptions{}); return err },
		"AllowanceChanges": func(c *Client) error {
			_, err := c.AllowanceChanges(context.Background(), "id")
			return err
		},
	}
	for name, call := range calls {
		_, c := MustFakeAPI(t, http.StatusBadRequest, `{"title":"Bad request","detail":"cursor is not one this API returned."}`)
		err := call(c)
		var ae *Error
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Detail != "cursor is not one this API returned." {
			t.Errorf("%s: err = %v, want the API's 400 with its detail", name, err)
		}
	}
	if _, err := New("http://x", "", nil).Grants(context.Background(), "", GrantOptions{}); err == nil {
		t.Error("Grants without an id sent a request")
	}
}
