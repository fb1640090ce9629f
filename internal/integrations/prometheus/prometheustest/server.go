// Package prometheustest serves Prometheus' instant-query API for tests:
// each query is answered from a rule the test gives.
package prometheustest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Rules answer a PromQL query with a single sample value, or, with ok
// false, with an empty vector (no data).
type Rules func(query string) (value float64, ok bool)

// NewServer starts a server answering GET and POST /api/v1/query from
// rules; it is closed when the test ends. Its URL is the Prometheus address.
func NewServer(t testing.TB, rules Rules) *httptest.Server {
	srv := httptest.NewServer(Handler(rules))
	t.Cleanup(srv.Close)
	return srv
}

// Handler answers GET and POST /api/v1/query from rules, for tests that
// wrap it (authentication) or serve it over TLS.
func Handler(rules Rules) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.URL.Path != "/api/v1/query" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		result := []any{}
		if v, ok := rules(r.Form.Get("query")); ok {
			result = append(result, map[string]any{"metric": map[string]string{}, "value": []any{1763780400, jsonNumber(v)}})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"status": "success",
			"data":   map[string]any{"resultType": "vector", "result": result},
		})
	})
}

// jsonNumber is a sample value as Prometheus writes it: a string holding
// the number.
func jsonNumber(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}
