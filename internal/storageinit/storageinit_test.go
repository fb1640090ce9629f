package storageinit_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/internal/storageinit"
)

const model = `{"weights":[2],"bias":1}`

// signingTime is the clock of the S3 requests and of the server.
var signingTime = time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// An http:// model is one GET on loopback, saved at the destination; the
// Secret's HTTP_AUTHORIZATION is sent as the Authorization header.
func TestFetchHTTP(t *testing.T) {
	var auth []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.URL.Path != "/models/fraud-v1.json" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(model))
	}))
	defer srv.Close()
	dir := t.TempDir()
	dest := filepath.Join(dir, "fraud-v1.json")
	f := storageinit.Fetcher{Getenv: env(map[string]string{"HTTP_AUTHORIZATION": "Bearer s3cr3t"})}
	require.NoError(t, f.Fetch(context.Background(), srv.URL+"/models/fraud-v1.json", dest))
	got, err := os.ReadFile(dest)
	require.NoError(t, err)
	assert.Equal(t, model, string(got))
	assert.Equal(t, []string{"Bearer s3cr3t"}, auth)
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 1, "no temporary file is left")

	// A missing model: the error names the URL and the status, and
	// nothing is written.
	missing := filepath.Join(dir, "fraud-v3.json")
	err = storageinit.Fetcher{}.Fetch(context.Background(), srv.URL+"/models/fraud-v3.json", missing)
	require.EqualError(t, err, "GET "+srv.URL+"/models/fraud-v3.json: 404 Not Found")
	assert.NoFileExists(t, missing)
}

// A server that does not answer is an error naming the URL, not a hang
// (the context bounds it here; the client's header timeout in the image).
func TestFetchHTTPUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	url := srv.URL + "/m.json"
	srv.Close()
	err := storageinit.Fetcher{}.Fetch(context.Background(), url, filepath.Join(t.TempDir(), "m.json"))
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "GET "+url+": "), err.Error())
	assert.Contains(t, err.Error(), "connection refused")
}

// Run writes the one-line error to the termination log the kubelet reads.
func TestRunWritesTheTerminationMessage(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "termination-log")
	err := storageinit.Run(context.Background(), storageinit.Fetcher{}, "gs://bucket/model", filepath.Join(dir, "m"), log)
	require.Error(t, err)
	got, rerr := os.ReadFile(log)
	require.NoError(t, rerr)
	assert.Equal(t, err.Error(), string(got))
	assert.Contains(t, string(got), "gs:// is not supported")
	assert.NotContains(t, string(got), "\n")

	// pvc:// claims are mounted, never fetched.
	err = storageinit.Fetcher{}.Fetch(context.Background(), "pvc://claim/m", filepath.Join(dir, "m"))
	assert.EqualError(t, err, `modelPath "pvc://claim/m": pvc:// is mounted by the operator, not fetched`)
}

// s3Server is gofakes3, an S3 implementation (ListObjectsV2, GetObject,
// path-style buckets, S3's XML errors), served on loopback, in front of
// which every request's Authorization header is recorded. gofakes3 checks
// no signatures (docs/decisions.md).
func s3Server(t *testing.T, objects map[string]string) (*httptest.Server, *[]string) {
	t.Helper()
	backend := s3mem.New()
	// The server's clock is the signer's: it refuses requests signed more
	// than 15 minutes away from it, as S3 does.
	faker := gofakes3.New(backend, gofakes3.WithTimeSource(gofakes3.FixedTimeSource(signingTime)))
	require.NoError(t, backend.CreateBucket("models"))
	for k, v := range objects {
		_, err := backend.PutObject("models", k, map[string]string{}, bytes.NewReader([]byte(v)), int64(len(v)), nil)
		require.NoError(t, err)
	}
	var auth []string
	var mu sync.Mutex
	h := faker.Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &auth
}

// An s3:// key that names an object becomes the destination file; one that
// names a prefix becomes a directory of the objects under it, with their
// relative paths (not the sibling v10). Requests are signed with SigV4 for
// the Secret's keys and region.
func TestFetchS3(t *testing.T) {
	srv, auth := s3Server(t, map[string]string{
		"sentiment/v1/model.pt":         "weights",
		"sentiment/v1/config/vocab.txt": "a b c",
		"sentiment/v10/model.pt":        "other",
	})
	f := storageinit.Fetcher{
		Getenv: env(map[string]string{
			"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
			"AWS_REGION": "eu-west-3", "AWS_ENDPOINT_URL": srv.URL,
		}),
		Now: func() time.Time { return signingTime },
	}
	ctx := context.Background()
	dir := t.TempDir()

	file := filepath.Join(dir, "model.pt")
	require.NoError(t, f.Fetch(ctx, "s3://models/sentiment/v1/model.pt", file))
	got, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "weights", string(got))

	prefix := filepath.Join(dir, "v1")
	require.NoError(t, f.Fetch(ctx, "s3://models/sentiment/v1", prefix))
	var files []string
	require.NoError(t, filepath.Walk(prefix, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			rel, _ := filepath.Rel(prefix, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	}))
	assert.ElementsMatch(t, []string{"model.pt", "config/vocab.txt"}, files)

	require.NotEmpty(t, *auth)
	for _, a := range *auth {
		assert.True(t, strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261126/eu-west-3/s3/aws4_request, SignedHeaders="), a)
	}

	err = f.Fetch(ctx, "s3://models/sentiment/v2", filepath.Join(dir, "v2"))
	assert.EqualError(t, err, "s3://models/sentiment/v2: no object has that key or is under it")
	err = f.Fetch(ctx, "s3://nobucket/m", filepath.Join(dir, "m"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "404 Not Found (NoSuchBucket")
}

// Without keys the requests are anonymous; half a key pair is an error.
func TestFetchS3Credentials(t *testing.T) {
	srv, auth := s3Server(t, map[string]string{"m.json": model})
	dest := filepath.Join(t.TempDir(), "m.json")
	anon := storageinit.Fetcher{Getenv: env(map[string]string{"AWS_ENDPOINT_URL": srv.URL})}
	require.NoError(t, anon.Fetch(context.Background(), "s3://models/m.json", dest))
	for _, a := range *auth {
		assert.Empty(t, a)
	}
	half := storageinit.Fetcher{Getenv: env(map[string]string{"AWS_ENDPOINT_URL": srv.URL, "AWS_ACCESS_KEY_ID": "AKID"})}
	err := half.Fetch(context.Background(), "s3://models/m.json", dest)
	assert.EqualError(t, err, "s3://models/m.json: the Secret gives only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
}
