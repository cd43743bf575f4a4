package engine

import (
	"context"
	"database/sql"
	"strings"
)

// querier is what a read runs on: the pool or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// IDRead is one read of ids: a SELECT of one string column, with its
// arguments.
type IDRead struct {
	Query string
	Args  []any
}

// ReadIDs runs reads in turn on q and returns the distinct ids they
// found, in the order found, at most limit of them (0: no limit); once
// limit are found the remaining reads are not run. The candidate reads of
// the sweepers and purgers, whose final statement repeats its condition.
func ReadIDs(ctx context.Context, q querier, limit int, reads ...IDRead) ([]string, error) {
	seen := map[string]bool{}
	var ids []string
	for _, r := range reads {
		if limit > 0 && len(ids) >= limit {
			break
		}
		rows, err := q.QueryContext(ctx, r.Query, r.Args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			if !seen[id] && (limit == 0 || len(ids) < limit) {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// Placeholders is "(?, ?, …)" with n marks, for an IN list.
func Placeholders(n int) string {
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
}

// Anys are ids as statement arguments.
func Anys(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// Read is the read of ids query runs with args.
func Read(query string, args ...any) IDRead { return IDRead{Query: query, Args: args} }
