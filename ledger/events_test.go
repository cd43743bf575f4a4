package ledger_test

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// documentedEvents reads docs/api.md's webhook table: for each event type,
// its data fields, and the fields of its object when it has one.
func documentedEvents(tb testing.TB) (fields, objectFields map[string][]string) {
	tb.Helper()
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		tb.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z]+\\.[a-z]+)` \\| [^|]* \\| (.*) \\|$")
	name := regexp.MustCompile("`([a-z0-9_.]+)`")
	paren := regexp.MustCompile(`\(([^()]*)\)`)
	fields, objectFields = map[string][]string{}, map[string][]string{}
	rows := row.FindAllSubmatch(doc, -1)
	for _, m := range rows {
		typ, cell := string(m[1]), string(m[2])
		if ref, ok := strings.CutPrefix(cell, "as `"); ok {
			base, _, _ := strings.Cut(ref, "`")
			fields[typ], objectFields[typ] = fields[base], objectFields[base]
			continue
		}
		if obj := regexp.MustCompile("`object` \\(([^()]*)\\)").FindStringSubmatch(cell); obj != nil {
			for _, n := range name.FindAllStringSubmatch(obj[1], -1) {
				objectFields[typ] = append(objectFields[typ], n[1])
			}
		}
		for _, n := range name.FindAllStringSubmatch(paren.ReplaceAllString(cell, ""), -1) {
			fields[typ] = append(fields[typ], n[1])
		}
	}
	return fields, objectFields
}

// anonymous is an event of typ as the ledger writes it for an anonymous
// link and caller: no account, no session (a stream grant), nothing
// optional set.
func anonymous(typ string) ledger.Event {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	two, one := 2, 1
	return ledger.Event{Type: typ, Timestamp: at, Data: ledger.EventData{
		LinkID: "0192f5c2-7a1e-7c4d-9b2a-3f1e5d6c7b8a", GrantID: "01a22fdd-1096-7b19-b11e-edc11a6176a4",
		Client: "203.0.113.7 curl/8.5.0", Kind: ledger.KindStream, Downloads: &two, Remaining: &one,
		Delivery: ledger.DeliveryStream, Filename: "f.bin", ExpiresAt: &at, ByteBudget: 1 << 20, MaxConcurrency: 4,
		Object: &ledger.EventObject{Bucket: "local", Key: "f.bin", VersionID: "v1", Size: 5, ETag: `"e"`},
	}}
}

// Every event's data has exactly the fields docs/api.md lists for its
// type, in that order; those without a value (the account of an
// anonymous link, the session of a stream grant) are null, not left out.
func TestEventDataHasExactlyTheDocumentedFields(t *testing.T) {
	docFields, docObject := documentedEvents(t)
	types := []string{ledger.EventLinkCreated, ledger.EventLinkRevoked, ledger.EventLinkExhausted, ledger.EventGrantCreated,
		ledger.EventGrantRefunded, ledger.EventGrantDelivered, ledger.EventGrantInterrupted, ledger.EventSessionCreated,
		ledger.EventObjectDeleted}
	if len(docFields) != len(types) {
		t.Errorf("docs/api.md documents %d event types (%v), the ledger writes %d", len(docFields), docFields, len(types))
	}
	for _, typ := range types {
		want := docFields[typ]
		if len(want) == 0 {
			t.Errorf("%s: not in docs/api.md's webhook table", typ)
			continue
		}
		if got := ledger.EventFields(typ); !slices.Equal(got, want) {
			t.Errorf("%s: the ledger writes fields %v, docs/api.md lists %v", typ, got, want)
		}
		body, err := json.Marshal(anonymous(typ))
		if err != nil {
			t.Fatal(err)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatal(err)
		}
		if keys := sortedKeys(top); !slices.Equal(keys, []string{"data", "timestamp", "type"}) {
			t.Errorf("%s: top-level keys %v", typ, keys)
		}
		if got := orderedKeys(t, top["data"]); !slices.Equal(got, want) {
			t.Errorf("%s: data keys %v, want %v\n%s", typ, got, want, body)
		}
		var data map[string]json.RawMessage
		json.Unmarshal(top["data"], &data) //nolint:errcheck // decoded above
		for _, k := range []string{"account_id", "session_id"} {
			if v, ok := data[k]; ok && string(v) != "null" {
				t.Errorf("%s: %s = %s, want null for an anonymous link and a stream grant", typ, k, v)
			}
		}
		if obj, ok := data["object"]; ok {
			if got := orderedKeys(t, obj); !slices.Equal(got, docObject[typ]) {
				t.Errorf("%s: object keys %v, docs/api.md lists %v", typ, got, docObject[typ])
			}
		}
		// A receiver decoding into ledger.Event gets what was written.
		var back ledger.Event
		if err := json.Unmarshal(body, &back); err != nil || back.Type != typ || back.Data.AccountID != "" || back.Data.LinkID == "" && typ != ledger.EventObjectDeleted {
			t.Errorf("%s: decoding %s gives %+v, %v", typ, body, back, err)
		}
	}
	// With values, the same fields carry them.
	e := anonymous(ledger.EventGrantCreated)
	e.Data.AccountID, e.Data.SessionID = "alice", "s1"
	body, _ := json.Marshal(e)
	if !bytes.Contains(body, []byte(`"session_id":"s1","account_id":"alice"`)) {
		t.Errorf("grant.created with an account and a session = %s", body)
	}
}

// The example event in docs/api.md has exactly its type's fields.
func TestEventExampleInTheDocsHasTheDocumentedFields(t *testing.T) {
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```json\n(\\{\n  \"type\": \"[a-z]+\\.[a-z]+\".*?\n\\})\n```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("no example event in docs/api.md")
	}
	var ev struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(m[1], &ev); err != nil {
		t.Fatalf("the example event is not JSON: %v", err)
	}
	if got, want := orderedKeys(t, ev.Data), ledger.EventFields(ev.Type); !slices.Equal(got, want) {
		t.Errorf("the %s example has data keys %v, want %v", ev.Type, got, want)
	}
}

func sortedKeys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// orderedKeys returns the keys of a JSON object in the order written.
func orderedKeys(tb testing.TB, obj json.RawMessage) []string {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		tb.Fatalf("%s is not an object", obj)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			tb.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			tb.Fatal(err)
		}
	}
	return keys
}
