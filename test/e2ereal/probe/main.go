// Command probe is the e2e-real suite's test image: one static binary that
// does one network or logging act per run and prints what happened.
//
//	probe say MESSAGE        print MESSAGE and exit 0
//	probe serve PORT         answer every HTTP request with "hello from <hostname>"
//	probe lookup NAME        resolve NAME; print the addresses (exit 1 when it fails)
//	probe get URL            HTTP GET URL; print the body (exit 1 when it fails)
//	probe dial HOST:PORT     TCP connect; print "connected" or the error (exit 1)
//	probe files PORT DIR     serve the files of DIR over HTTP (a model store)
//	probe sleep DURATION     print, sleep DURATION, print and exit 0 (a worker
//	                         that runs a known time)
//	probe hold FILE MAX      print, wait until FILE exists (checked every
//	                         second), print and exit 0; exit 1 if MAX passes
//	                         first (a worker that runs until the test
//	                         creates FILE in its volume)
//	probe predict URL N      N prediction POSTs to URL, each on a new connection
//	                         (so kube-proxy picks an endpoint for each); print
//	                         the answers counted by version, pod and code as JSON
//	probe post URL BODY      one JSON POST of BODY to URL; print the status and
//	                         the answer (exit 1 unless 200)
//	probe split URL INTERVAL a prediction POST to URL every INTERVAL, each on
//	                         a new connection, until killed; print one line
//	                         per answer: "<unix ms> <version>", or
//	                         "<unix ms> !<code or error>" when it failed
//	probe load URL PORT      a steady load: a prediction POST to URL every 50 ms,
//	                         each on a new connection, until killed; GET
//	                         /answers?since=MS on PORT counts the answers sent
//	                         at or after MS (Unix milliseconds) by version,
//	                         code and failure, as JSON
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: probe say|serve|lookup|get|dial ARG")
		os.Exit(2)
	}
	arg := os.Args[2]
	switch os.Args[1] {
	case "say":
		fmt.Println(arg)
	case "serve":
		host, _ := os.Hostname()
		http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "hello from %s\n", host) })
		fail(http.ListenAndServe(":"+arg, nil))
	case "lookup":
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, arg)
		fail(err)
		fmt.Println("addresses:", strings.Join(addrs, ","))
	case "get":
		c := &http.Client{Timeout: 10 * time.Second}
		resp, err := c.Get(arg)
		fail(err)
		body, err := io.ReadAll(resp.Body)
		fail(err)
		fmt.Printf("status %d: %s", resp.StatusCode, body)
	case "dial":
		conn, err := net.DialTimeout("tcp", arg, 10*time.Second)
		fail(err)
		conn.Close()
		fmt.Println("connected")
	case "files":
		if len(os.Args) < 4 {
			fail(fmt.Errorf("usage: probe files PORT DIR"))
		}
		fail(http.ListenAndServe(":"+arg, http.FileServer(http.Dir(os.Args[3]))))
	case "sleep":
		d, err := time.ParseDuration(arg)
		fail(err)
		fmt.Println("sleeping", d)
		time.Sleep(d)
		fmt.Println("slept", d)
	case "hold":
		if len(os.Args) < 4 {
			fail(fmt.Errorf("usage: probe hold FILE MAX"))
		}
		max, err := time.ParseDuration(os.Args[3])
		fail(err)
		fmt.Println("holding until", arg, "exists, at most", max)
		for deadline := time.Now().Add(max); ; time.Sleep(time.Second) {
			if _, err := os.Stat(arg); err == nil {
				fmt.Println("released by", arg)
				return
			}
			if time.Now().After(deadline) {
				fail(fmt.Errorf("not released within %s", max))
			}
		}
	case "post":
		if len(os.Args) < 4 {
			fail(fmt.Errorf("usage: probe post URL BODY"))
		}
		c := &http.Client{Timeout: 10 * time.Second}
		resp, err := c.Post(arg, "application/json", strings.NewReader(os.Args[3]))
		fail(err)
		body, err := io.ReadAll(resp.Body)
		fail(err)
		fmt.Printf("status %d: %s", resp.StatusCode, body)
		if resp.StatusCode != http.StatusOK {
			os.Exit(1)
		}
	case "predict":
		if len(os.Args) < 4 {
			fail(fmt.Errorf("usage: probe predict URL N"))
		}
		n, err := strconv.Atoi(os.Args[3])
		fail(err)
		out, err := json.Marshal(predict(arg, n))
		fail(err)
		fmt.Println(string(out))
	case "split":
		if len(os.Args) < 4 {
			fail(fmt.Errorf("usage: probe split URL INTERVAL"))
		}
		every, err := time.ParseDuration(os.Args[3])
		fail(err)
		split(arg, every)
	case "load":
		if len(os.Args) < 4 {
			fail(fmt.Errorf("usage: probe load URL PORT"))
		}
		l := &load{}
		go l.run(arg)
		http.HandleFunc("/answers", l.serveAnswers)
		fail(http.ListenAndServe(":"+os.Args[3], nil))
	default:
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
}

func fail(err error) {
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}

// Counts are what `probe predict` prints.
type Counts struct {
	Versions map[string]int `json:"versions"`
	Pods     map[string]int `json:"pods"`
	Codes    map[string]int `json:"codes"`
	Errors   []string       `json:"errors,omitempty"`
}

// predict sends n predictions to url, each on a connection of its own, and
// counts the answers. Transport errors are listed (at most ten), not fatal.
func predict(url string, n int) Counts {
	c := Counts{Versions: map[string]int{}, Pods: map[string]int{}, Codes: map[string]int{}}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range n {
		resp, err := client.Post(url, "application/json", strings.NewReader(fmt.Sprintf(`{"instances":[[%d]]}`, i)))
		if err != nil {
			c.Codes["transport"]++
			if len(c.Errors) < 10 {
				c.Errors = append(c.Errors, err.Error())
			}
			continue
		}
		var body struct{ Version, Host string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		c.Codes[strconv.Itoa(resp.StatusCode)]++
		if resp.StatusCode == http.StatusOK {
			c.Versions[body.Version]++
			c.Pods[body.Host]++
		}
	}
	return c
}

// split sends a prediction to url every interval, each on a connection of
// its own (so kube-proxy picks an endpoint for each), and prints which
// version answered, with the time the request was sent: what a client of
// the Service is served, request by request.
func split(url string, every time.Duration) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; ; i++ {
		sent := time.Now()
		answer := "!transport"
		resp, err := client.Post(url, "application/json", strings.NewReader(fmt.Sprintf(`{"instances":[[%d]]}`, i)))
		if err == nil {
			var body struct{ Version string }
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			answer = body.Version
			if resp.StatusCode != http.StatusOK || answer == "" {
				answer = "!" + strconv.Itoa(resp.StatusCode)
			}
		}
		fmt.Printf("%d %s\n", sent.UnixMilli(), answer)
		<-tick.C
	}
}

// loadPeriod is the time between two requests of `probe load` (20 per
// second when the answers are quick).
const loadPeriod = 50 * time.Millisecond

// answer is one request of `probe load`: when it was sent, the version that
// answered (the model server names it in errors too) and the status code,
// or "transport" when no answer came.
type answer struct {
	at      time.Time
	version string
	code    string
	err     string
}

// load is `probe load`: the answers so far.
type load struct {
	mu      sync.Mutex
	answers []answer
}

// run sends predictions to url forever, one every loadPeriod, each on a new
// connection (so kube-proxy picks an endpoint for each).
func (l *load) run(url string) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; ; i++ {
		began := time.Now()
		a := answer{at: began}
		resp, err := client.Post(url, "application/json", strings.NewReader(fmt.Sprintf(`{"instances":[[%d]]}`, i)))
		if err != nil {
			a.code, a.err = "transport", err.Error()
		} else {
			var body struct{ Version, Error string }
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			a.code, a.version = strconv.Itoa(resp.StatusCode), body.Version
			if resp.StatusCode != http.StatusOK {
				a.err = fmt.Sprintf("%s: %d %s", body.Version, resp.StatusCode, body.Error)
			}
		}
		l.mu.Lock()
		l.answers = append(l.answers, a)
		l.mu.Unlock()
		time.Sleep(time.Until(began.Add(loadPeriod)))
	}
}

// LoadCounts is what GET /answers of `probe load` answers.
type LoadCounts struct {
	// Total requests sent in the period.
	Total int `json:"total"`
	// Versions counts the answers by the version that gave them (every
	// code).
	Versions map[string]int `json:"versions"`
	// Codes counts them by status code ("transport": no answer).
	Codes map[string]int `json:"codes"`
	// Failed counts every request not answered 200.
	Failed int `json:"failed"`
	// Errors are the first ten failures.
	Errors []string `json:"errors,omitempty"`
	// First and Last are the Unix milliseconds of the first and the last
	// request counted.
	First int64 `json:"first"`
	Last  int64 `json:"last"`
}

func (l *load) serveAnswers(w http.ResponseWriter, r *http.Request) {
	since, err := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64)
	if err != nil {
		http.Error(w, "since must be Unix milliseconds", http.StatusBadRequest)
		return
	}
	c := LoadCounts{Versions: map[string]int{}, Codes: map[string]int{}}
	l.mu.Lock()
	for _, a := range l.answers {
		ms := a.at.UnixMilli()
		if ms < since {
			continue
		}
		if c.Total == 0 {
			c.First = ms
		}
		c.Last = ms
		c.Total++
		c.Codes[a.code]++
		if a.version != "" {
			c.Versions[a.version]++
		}
		if a.code != "200" {
			c.Failed++
			if len(c.Errors) < 10 {
				c.Errors = append(c.Errors, a.at.UTC().Format(time.RFC3339Nano)+" "+a.err)
			}
		}
	}
	l.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(c)
}
