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
//	probe predict URL N      N prediction POSTs to URL, each on a new connection
//	                         (so kube-proxy picks an endpoint for each); print
//	                         the answers counted by version, pod and code as JSON
//	probe post URL BODY      one JSON POST of BODY to URL; print the status and
//	                         the answer (exit 1 unless 200)
//	probe split URL INTERVAL a prediction POST to URL every INTERVAL, each on
//	                         a new connection, until killed; print one line
//	                         per answer: "<unix ms> <version>", or
//	                         "<unix ms> !<code or error>" when it failed
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
