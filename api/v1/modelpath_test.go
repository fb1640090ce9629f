package v1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// The server's MODEL_PATH for each scheme: the claim's path under the
// mount; the last segment of a URL's path or an S3 key (a file, or the
// directory of an S3 prefix); for none, the mount itself (a bucket) or the
// file model in it (a URL).
func TestModelSourceLocalPath(t *testing.T) {
	for modelPath, want := range map[string]string{
		"pvc://models":                           "/mnt/model",
		"pvc://models/fraud/v1.json":             "/mnt/model/fraud/v1.json",
		"http://store.ns.svc/fraud-v1.json":      "/mnt/model/fraud-v1.json",
		"https://h/models/m.json?rev=2#x":        "/mnt/model/m.json",
		"https://h":                              "/mnt/model/model",
		"http://h/models/":                       "/mnt/model/models",
		"s3://models/sentiment/v1/model.pt":      "/mnt/model/model.pt",
		"s3://models/sentiment/v1/":              "/mnt/model/v1",
		"s3://models":                            "/mnt/model",
		"s3://models/":                           "/mnt/model",
		"s3://models.eu-west-3.example/a%20b.pt": "/mnt/model/a%20b.pt",
	} {
		src, err := mlv1.ParseModelPath(modelPath)
		require.NoError(t, err, modelPath)
		assert.Equal(t, want, src.LocalPath(), modelPath)
		assert.Equal(t, src.Scheme != "pvc", src.Fetched(), modelPath)
	}
	src, err := mlv1.ParseModelPath("s3://models/sentiment/v1/model.pt")
	require.NoError(t, err)
	assert.Equal(t, mlv1.ModelSource{Scheme: "s3", Host: "models", Path: "sentiment/v1/model.pt"}, src)
	_, err = mlv1.ParseModelPath("models/v1")
	assert.EqualError(t, err, "must be pvc://<claim>[/<path>], http(s)://<host>/<path> or s3://<bucket>[/<key>]")
}
