package v1

import (
	"fmt"
	"net/url"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The storage initializer contract: how a version's modelPath reaches its
// model server. The builder (controllers/modeldeployment), the webhook and
// the initializer itself (internal/storageinit) all read it from here.
const (
	// ModelMountPath is where a version's model is in the server
	// container: the emptyDir the storage initializer fills, or the pvc://
	// claim, mounted read-only.
	ModelMountPath = "/mnt/model"
	// StorageInitializerContainerName is the init container that fetches
	// http(s):// and s3:// models.
	StorageInitializerContainerName = "storage-initializer"
	// ModelVolumeName is the volume mounted at ModelMountPath.
	ModelVolumeName = "model"
	// EnvModelPath is the server's local path of the model; EnvModelURI
	// is the version's modelPath as written.
	EnvModelPath = "MODEL_PATH"
	EnvModelURI  = "MODEL_URI"
)

// Model path schemes the operator serves from.
const (
	ModelSchemePVC   = "pvc"
	ModelSchemeHTTP  = "http"
	ModelSchemeHTTPS = "https"
	ModelSchemeS3    = "s3"
)

// ModelPathSchemes are the prefixes a modelPath may start with.
var ModelPathSchemes = []string{"pvc://", "http://", "https://", "s3://"}

// ModelSource is a parsed modelPath.
type ModelSource struct {
	// Scheme is pvc, http, https or s3.
	Scheme string
	// Host is the claim (pvc), the bucket (s3) or the URL's host (http(s)).
	Host string
	// Path is the path in the claim, the key in the bucket (no leading
	// slash) or the URL's path.
	Path string
	// URL is the whole http(s) URL.
	URL string
}

// ParseModelPath reads a modelPath and says what is wrong with it: an
// unsupported scheme, a pvc:// claim that is no valid name, an s3://
// bucket that is no valid bucket name, an http(s) URL without a host, or a
// path with "..".
func ParseModelPath(p string) (ModelSource, error) {
	scheme, rest, ok := strings.Cut(p, "://")
	if !ok || rest == "" {
		return ModelSource{}, fmt.Errorf("must be %s", modelPathForms)
	}
	switch scheme {
	case ModelSchemePVC, ModelSchemeS3:
		host, key, _ := strings.Cut(rest, "/")
		src := ModelSource{Scheme: scheme, Host: host, Path: key}
		if scheme == ModelSchemePVC {
			if msgs := validation.IsDNS1123Subdomain(host); len(msgs) > 0 {
				return ModelSource{}, fmt.Errorf("pvc://<claim>[/<path>]: the claim %q is no PersistentVolumeClaim name: %s", host, strings.Join(msgs, "; "))
			}
		} else if !s3Bucket(host) {
			return ModelSource{}, fmt.Errorf("s3://<bucket>[/<key>]: %q is no S3 bucket name (3 to 63 lower-case letters, digits, dots and dashes)", host)
		}
		if hasDotDot(key) {
			return ModelSource{}, fmt.Errorf("%s://: the path may not contain \"..\"", scheme)
		}
		return src, nil
	case ModelSchemeHTTP, ModelSchemeHTTPS:
		u, err := url.Parse(p)
		if err != nil {
			return ModelSource{}, fmt.Errorf("is no URL: %v", err)
		}
		if u.Host == "" {
			return ModelSource{}, fmt.Errorf("%s://<host>/<path>: the URL has no host", scheme)
		}
		return ModelSource{Scheme: scheme, Host: u.Host, Path: u.Path, URL: p}, nil
	}
	return ModelSource{}, fmt.Errorf("scheme %s:// is not supported: must be %s", scheme, modelPathForms)
}

const modelPathForms = "pvc://<claim>[/<path>], http(s)://<host>/<path> or s3://<bucket>[/<key>]"

func s3Bucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func hasDotDot(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

// Fetched says whether the storage initializer fetches the model (http(s),
// s3) rather than the claim being mounted (pvc).
func (s ModelSource) Fetched() bool { return s.Scheme != ModelSchemePVC }

// LocalPath is where the model is in the server container: for pvc://,
// ModelMountPath/<path> (the claim is mounted there); otherwise
// ModelMountPath/<the last non-empty segment of the URL path or the key>
// (a file, or for an s3 prefix a directory). Without such a segment, a
// whole bucket is ModelMountPath itself and an http(s) URL of a host's root
// the file ModelMountPath/model.
func (s ModelSource) LocalPath() string {
	if s.Scheme == ModelSchemePVC {
		return path.Join(ModelMountPath, s.Path)
	}
	base := path.Base(path.Clean("/" + s.Path))
	if base == "/" || base == "." {
		if s.Scheme == ModelSchemeS3 {
			return ModelMountPath
		}
		return path.Join(ModelMountPath, "model")
	}
	return path.Join(ModelMountPath, base)
}
