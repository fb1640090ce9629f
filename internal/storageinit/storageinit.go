// Package storageinit is the storage initializer: the init container of a
// ModelDeployment version's pods that puts the model named by modelPath
// into the model volume before the server starts (cmd/storage-initializer,
// the image ghcr.io/ml-operator/storage-initializer). It fetches
//
//   - http:// and https:// URLs: one GET, the body saved as one file;
//   - s3://<bucket>[/<key>]: the object <key>, and every object under
//     <key>/ (a prefix), with AWS Signature Version 4 when the Secret the
//     version names gives keys, from AWS or from the S3-compatible server at
//     AWS_ENDPOINT_URL (path-style requests).
//
// pvc:// claims are mounted by the operator, not fetched. What goes wrong
// is one line, written to the container's termination message, which the
// operator quotes in the ModelDeployment's conditions (ModelFetchFailed).
package storageinit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// DefaultImage is the initializer's image under the name it ships with: the
// manager's --storage-initializer-image default.
const DefaultImage = "ghcr.io/ml-operator/storage-initializer:v0.2.0"

// User is the numeric non-root user the image runs as (the pods are
// runAsNonRoot, which needs a number the kubelet can check).
const User = "65532:65532"

// The environment the initializer reads: the keys of the Secret named by a
// version's modelSecretName.
const (
	EnvAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken    = "AWS_SESSION_TOKEN"
	EnvRegion          = "AWS_REGION"
	EnvDefaultRegion   = "AWS_DEFAULT_REGION"
	EnvEndpointURL     = "AWS_ENDPOINT_URL"
	EnvEndpointURLS3   = "AWS_ENDPOINT_URL_S3"
	EnvHTTPAuth        = "HTTP_AUTHORIZATION"
)

// DefaultRegion signs requests when the Secret names no region.
const DefaultRegion = "us-east-1"

// Fetcher fetches models.
type Fetcher struct {
	// Client sends the requests (NewClient's when nil).
	Client *http.Client
	// Getenv reads the credentials and endpoint (os.Getenv in the image).
	Getenv func(string) string
	// Now is the signing time (time.Now when nil).
	Now func() time.Time
}

// NewClient is an HTTP client that gives up on a server that does not
// answer (connect 30 s, response headers 60 s) but lets a large model take
// as long as its body takes.
func NewClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
	}}
}

func (f Fetcher) client() *http.Client {
	if f.Client != nil {
		return f.Client
	}
	return NewClient()
}

func (f Fetcher) getenv(k string) string {
	if f.Getenv == nil {
		return ""
	}
	return strings.TrimSpace(f.Getenv(k))
}

// Fetch puts the model at modelPath into dest (a file, or for an s3
// prefix a directory). Files are written next to their place and renamed,
// so a file at its place is complete.
func (f Fetcher) Fetch(ctx context.Context, modelPath, dest string) error {
	src, err := mlv1.ParseModelPath(modelPath)
	if err != nil {
		return fmt.Errorf("modelPath %q: %v", modelPath, err)
	}
	switch src.Scheme {
	case mlv1.ModelSchemeHTTP, mlv1.ModelSchemeHTTPS:
		return f.fetchHTTP(ctx, src.URL, dest)
	case mlv1.ModelSchemeS3:
		return f.fetchS3(ctx, src, dest)
	}
	return fmt.Errorf("modelPath %q: %s:// is mounted by the operator, not fetched", modelPath, src.Scheme)
}

func (f Fetcher) fetchHTTP(ctx context.Context, u, dest string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %v", u, err)
	}
	if auth := f.getenv(EnvHTTPAuth); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := f.client().Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %v", u, unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	if err := writeFile(dest, resp.Body); err != nil {
		return fmt.Errorf("GET %s: %v", u, err)
	}
	return nil
}

// unwrapURLError drops url.Error's "Get \"...\": " prefix: the message
// names the URL already.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// writeFile writes r to dest through a temporary file in its directory.
func writeFile(dest string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".fetch-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %v", dest, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dest)
}

// s3Client signs and sends S3 requests.
type s3Client struct {
	f      Fetcher
	base   *url.URL // path-style: the endpoint; virtual-hosted: the bucket's host
	bucket string
	path   bool
	region string
	creds  *aws.Credentials
}

func (f Fetcher) s3(bucket string) (*s3Client, error) {
	region := f.getenv(EnvRegion)
	if region == "" {
		region = f.getenv(EnvDefaultRegion)
	}
	if region == "" {
		region = DefaultRegion
	}
	c := &s3Client{f: f, bucket: bucket, region: region}
	endpoint := f.getenv(EnvEndpointURLS3)
	if endpoint == "" {
		endpoint = f.getenv(EnvEndpointURL)
	}
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("%s %q is no http(s) URL", EnvEndpointURL, endpoint)
		}
		c.base, c.path = u, true
	} else {
		c.base = &url.URL{Scheme: "https", Host: bucket + ".s3." + region + ".amazonaws.com"}
	}
	id, secret := f.getenv(EnvAccessKeyID), f.getenv(EnvSecretAccessKey)
	switch {
	case id != "" && secret != "":
		c.creds = &aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: f.getenv(EnvSessionToken)}
	case id != "" || secret != "":
		return nil, fmt.Errorf("the Secret gives only one of %s and %s", EnvAccessKeyID, EnvSecretAccessKey)
	}
	return c, nil
}

// emptyPayloadHash is the SHA-256 of an empty body, what every GET signs.
var emptyPayloadHash = func() string { h := sha256.Sum256(nil); return hex.EncodeToString(h[:]) }()

// get sends a signed GET of key (the bucket when empty) with query.
func (c *s3Client) get(ctx context.Context, key string, query url.Values) (*http.Response, error) {
	u := *c.base
	p := strings.TrimSuffix(u.Path, "/")
	if c.path {
		p += "/" + c.bucket
	}
	escaped := p
	if key != "" {
		segs := strings.Split(key, "/")
		for i, s := range segs {
			segs[i] = url.PathEscape(s)
		}
		p += "/" + key
		escaped += "/" + strings.Join(segs, "/")
	} else {
		p += "/"
		escaped += "/"
	}
	u.Path, u.RawPath = p, escaped
	u.RawQuery = strings.ReplaceAll(query.Encode(), "+", "%20")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Amz-Content-Sha256", emptyPayloadHash)
	if c.creds != nil {
		now := time.Now
		if c.f.Now != nil {
			now = c.f.Now
		}
		signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
		if err := signer.SignHTTP(ctx, *c.creds, req, emptyPayloadHash, "s3", c.region, now().UTC()); err != nil {
			return nil, err
		}
	}
	resp, err := c.f.client().Do(req)
	if err != nil {
		return nil, unwrapURLError(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, s3Error(resp)
	}
	return resp, nil
}

// s3Error is S3's error answer: its code and message, or the HTTP status.
func s3Error(resp *http.Response) error {
	var e struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if xml.Unmarshal(data, &e) == nil && e.Code != "" {
		if e.Message != "" {
			return fmt.Errorf("%s (%s: %s)", resp.Status, e.Code, e.Message)
		}
		return fmt.Errorf("%s (%s)", resp.Status, e.Code)
	}
	return errors.New(resp.Status)
}

type listResult struct {
	Contents []struct {
		Key string `xml:"Key"`
	} `xml:"Contents"`
	IsTruncated           bool   `xml:"IsTruncated"`
	NextContinuationToken string `xml:"NextContinuationToken"`
}

// list returns every key that starts with prefix (ListObjectsV2, page by page).
func (c *s3Client) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	token := ""
	for {
		q := url.Values{"list-type": {"2"}, "prefix": {prefix}}
		if token != "" {
			q.Set("continuation-token", token)
		}
		resp, err := c.get(ctx, "", q)
		if err != nil {
			return nil, err
		}
		var page listResult
		err = xml.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("reading the object list: %v", err)
		}
		for _, o := range page.Contents {
			keys = append(keys, o.Key)
		}
		if !page.IsTruncated || page.NextContinuationToken == "" {
			return keys, nil
		}
		token = page.NextContinuationToken
	}
}

func (c *s3Client) download(ctx context.Context, key, dest string) error {
	resp, err := c.get(ctx, key, nil)
	if err != nil {
		return fmt.Errorf("GET s3://%s/%s: %v", c.bucket, key, err)
	}
	defer resp.Body.Close()
	if err := writeFile(dest, resp.Body); err != nil {
		return fmt.Errorf("GET s3://%s/%s: %v", c.bucket, key, err)
	}
	return nil
}

// fetchS3 lists the objects under the key: the object named exactly by it
// becomes dest, those under <key>/ (every object for an empty key or one
// ending in /) go below dest with their relative paths. Without the right
// to list, the key is fetched as one object.
func (f Fetcher) fetchS3(ctx context.Context, src mlv1.ModelSource, dest string) error {
	c, err := f.s3(src.Host)
	if err != nil {
		return fmt.Errorf("s3://%s/%s: %v", src.Host, src.Path, err)
	}
	key := src.Path
	keys, err := c.list(ctx, key)
	if err != nil {
		if key != "" && !strings.HasSuffix(key, "/") {
			return c.download(ctx, key, dest)
		}
		return fmt.Errorf("listing s3://%s/%s: %v", src.Host, key, err)
	}
	dir := key
	if dir != "" && !strings.HasSuffix(dir, "/") {
		dir += "/"
	}
	n := 0
	for _, k := range keys {
		switch {
		case k == key && !strings.HasSuffix(k, "/"):
			if err := c.download(ctx, k, dest); err != nil {
				return err
			}
			n++
		case strings.HasPrefix(k, dir) && !strings.HasSuffix(k, "/"):
			rel := strings.TrimPrefix(k, dir)
			if rel == "" || hasDotDot(rel) || path.IsAbs(rel) {
				continue
			}
			if err := c.download(ctx, k, filepath.Join(dest, filepath.FromSlash(rel))); err != nil {
				return err
			}
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("s3://%s/%s: no object has that key or is under it", src.Host, key)
	}
	return nil
}

func hasDotDot(p string) bool {
	for _, s := range strings.Split(p, "/") {
		if s == ".." {
			return true
		}
	}
	return false
}

// Run is the initializer's main: fetch modelPath into dest, and on failure
// write the one-line error to terminationLog (the kubelet's termination
// message, which the operator quotes) and return it.
func Run(ctx context.Context, f Fetcher, modelPath, dest, terminationLog string) error {
	err := f.Fetch(ctx, modelPath, dest)
	if err == nil {
		return nil
	}
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	if terminationLog != "" {
		_ = os.WriteFile(terminationLog, []byte(msg), 0o644)
	}
	return errors.New(msg)
}
