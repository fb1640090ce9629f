// Command noopwebhook is the benchmark's floor for admission: an HTTPS
// server that allows every AdmissionReview it is sent, doing nothing else.
// `make bench` (test/bench) builds and runs it on 127.0.0.1 beside the
// manager and registers it, next to each of the manager's admission
// webhooks, for the same resources and operations, so the API server calls
// both during the same burst. Its latency in the API server's histogram is
// what admission costs with no handler behind it: the API server's side,
// HTTP/2 over TLS on loopback and a process that has to get a CPU.
//
// It uses the standard library only, so it stays small and starts at once.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "host:port to serve HTTPS on")
	cert := flag.String("cert", "tls.crt", "serving certificate (PEM)")
	key := flag.String("key", "tls.key", "its private key (PEM)")
	flag.Parse()
	srv := &http.Server{Addr: *addr, Handler: http.HandlerFunc(allow), ReadHeaderTimeout: 10 * time.Second}
	// ListenAndServeTLS offers HTTP/2, as controller-runtime's webhook
	// server does: the API server multiplexes its calls on one connection.
	if err := srv.ListenAndServeTLS(*cert, *key); err != nil {
		fmt.Fprintln(os.Stderr, "noopwebhook:", err)
		os.Exit(1)
	}
}

// review is the part of an admission.k8s.io/v1 AdmissionReview the answer
// needs: the request's uid.
type review struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Request    *struct {
		UID string `json:"uid"`
	} `json:"request,omitempty"`
	Response *response `json:"response,omitempty"`
}

type response struct {
	UID     string `json:"uid"`
	Allowed bool   `json:"allowed"`
}

// allow answers an AdmissionReview with allowed: true and no patch. The
// whole request body is still read and parsed, as any webhook must.
func allow(w http.ResponseWriter, r *http.Request) {
	in := review{}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	out := review{APIVersion: in.APIVersion, Kind: in.Kind, Response: &response{UID: in.Request.UID, Allowed: true}}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
