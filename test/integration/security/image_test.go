package security_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// dockerStage is one FROM ... stage of a Dockerfile, its instructions in
// order (keyword upper-cased, line continuations joined).
type dockerStage struct {
	from         string
	instructions [][2]string
}

// parseDockerfile splits a Dockerfile into its stages.
func parseDockerfile(data []byte) []dockerStage {
	var stages []dockerStage
	var logical strings.Builder
	flush := func() {
		line := strings.TrimSpace(logical.String())
		logical.Reset()
		if line == "" {
			return
		}
		keyword, rest, _ := strings.Cut(line, " ")
		keyword = strings.ToUpper(keyword)
		rest = strings.TrimSpace(rest)
		if keyword == "FROM" {
			stages = append(stages, dockerStage{from: rest})
			return
		}
		if len(stages) > 0 {
			last := &stages[len(stages)-1]
			last.instructions = append(last.instructions, [2]string{keyword, rest})
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			logical.WriteString(cont + " ")
			continue
		}
		logical.WriteString(line)
		flush()
	}
	flush()
	return stages
}

// The manager image runs as a numeric non-root user (so the kubelet can
// check runAsNonRoot without reading /etc/passwd) on a distroless base with
// no shell, and the Deployments' securityContext, if it names a user, names
// the same one.
func TestManagerImageRunsAsNonRoot(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "Dockerfile"))
	require.NoError(t, err)
	stages := parseDockerfile(data)
	require.NotEmpty(t, stages)
	final := stages[len(stages)-1]
	base, _, _ := strings.Cut(final.from, " ")
	assert.Truef(t, strings.HasPrefix(base, "gcr.io/distroless/") && strings.HasSuffix(base, ":nonroot"),
		"the final stage is FROM %s, want a distroless :nonroot image", base)

	user := ""
	for _, ins := range final.instructions {
		switch ins[0] {
		case "USER":
			user = ins[1]
		case "RUN":
			t.Errorf("the final stage runs %q: it has no shell, and should need none", ins[1])
		}
	}
	require.NotEmpty(t, user, "the final stage sets no USER: the image would run as root")
	uid, gid, _ := strings.Cut(user, ":")
	uidN, err := strconv.ParseInt(uid, 10, 64)
	require.NoErrorf(t, err, "USER %s is not numeric: runAsNonRoot cannot verify a user name", user)
	assert.NotZero(t, uidN, "USER is root")
	if gid != "" {
		gidN, err := strconv.ParseInt(gid, 10, 64)
		require.NoErrorf(t, err, "USER %s: group is not numeric", user)
		assert.NotZero(t, gidN, "USER's group is root")
	}

	for _, mp := range managerPods(t) {
		for _, sc := range []*int64{podRunAsUser(mp), containerRunAsUser(t, mp)} {
			if sc != nil {
				assert.Equalf(t, uidN, *sc, "%s: runAsUser differs from the image's USER", mp.source)
			}
		}
	}
}

func podRunAsUser(mp managerPod) *int64 {
	if mp.template.Spec.SecurityContext == nil {
		return nil
	}
	return mp.template.Spec.SecurityContext.RunAsUser
}

func containerRunAsUser(t *testing.T, mp managerPod) *int64 {
	c := managerContainer(t, &mp.template.Spec)
	if c.SecurityContext == nil {
		return nil
	}
	return c.SecurityContext.RunAsUser
}

// The Dockerfile parser sees through continuations and comments, and finds
// a USER reset after the good one (the check above would then fail).
func TestParseDockerfile(t *testing.T) {
	stages := parseDockerfile([]byte(`FROM golang:1.26 AS builder
RUN go build \
    -o manager ./cmd
# USER 0
FROM gcr.io/distroless/static:nonroot
COPY --from=builder /workspace/manager .
USER 65532:65532
user root
ENTRYPOINT ["/manager"]
`))
	require.Len(t, stages, 2)
	assert.Equal(t, "golang:1.26 AS builder", stages[0].from)
	assert.Equal(t, [][2]string{{"RUN", "go build      -o manager ./cmd"}}, stages[0].instructions)
	assert.Equal(t, [][2]string{{"COPY", "--from=builder /workspace/manager ."}, {"USER", "65532:65532"},
		{"USER", "root"}, {"ENTRYPOINT", `["/manager"]`}}, stages[1].instructions)
}
