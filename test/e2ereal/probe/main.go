// Command probe is the e2e-real suite's test image: one static binary that
// does one network or logging act per run and prints what happened.
//
//	probe say MESSAGE        print MESSAGE and exit 0
//	probe serve PORT         answer every HTTP request with "hello from <hostname>"
//	probe lookup NAME        resolve NAME; print the addresses (exit 1 when it fails)
//	probe get URL            HTTP GET URL; print the body (exit 1 when it fails)
//	probe dial HOST:PORT     TCP connect; print "connected" or the error (exit 1)
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
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
