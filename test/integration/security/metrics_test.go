package security_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ml-operator/ml-operator/internal/manager"
	"github.com/ml-operator/ml-operator/test/testutil"
)

var (
	k8s client.Client
	cfg *rest.Config
)

// The metrics test runs the real manager against a real API server
// (envtest), which answers its TokenReviews and SubjectAccessReviews.
func TestMain(m *testing.M) {
	os.Exit(testutil.Main(m, testutil.EnvOptions{}, func(env *testutil.Env) (func(), error) {
		k8s, cfg = env.Client, env.Config
		return nil, nil
	}))
}

// With the manager's default options, /metrics is HTTPS only, refuses a
// request without a token (401) or with a token the API server does not
// know, refuses a valid service account token without RBAC for /metrics
// (403), and serves one with it (200).
func TestMetricsAreHTTPSWithAuthnAndAuthzByDefault(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := manager.NewOptions()
	require.True(t, opts.MetricsSecure, "metrics are secure by default")
	addr := testutil.FreeAddr(t)
	opts.MetricsAddr = addr
	// What a test cannot have: a lease namespace, webhook certificates and probe ports.
	opts.LeaderElect = false
	opts.EnableWebhooks = false
	opts.ProbeAddr = "0"
	mgr, err := manager.New(cfg, opts)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	ns := testutil.Namespace(t, k8s)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	tokenOf := func(name string) string {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		require.NoError(t, k8s.Create(ctx, sa))
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		require.NoError(t, err)
		return tr.Status.Token
	}
	token := tokenOf("nobody")
	// The reader is bound before its first request: the filter caches
	// denials for 30 s.
	reader := tokenOf("prometheus")
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader-" + ns},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	require.NoError(t, k8s.Create(ctx, role))
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}},
	}
	require.NoError(t, k8s.Create(ctx, binding))
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), binding)
		_ = k8s.Delete(context.Background(), role)
	})

	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the manager's self-signed certificate
	}}
	get := func(scheme, bearer string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := insecure.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}

	// The server comes up with the manager.
	testutil.Eventually(t, func() bool { _, err := get("https", ""); return err == nil }, "metrics server listening")

	code, err := get("https", "")
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, code, "no token")

	// A token the API server does not know: controller-runtime's filter
	// answers 500 "Authentication failed" when the TokenReview errors, 401
	// when it says unauthenticated. Either way nothing is served.
	code, err = get("https", "not-a-token")
	require.NoError(t, err)
	assert.Contains(t, []int{http.StatusUnauthorized, http.StatusInternalServerError}, code, "a token the API server does not know")

	code, err = get("https", token)
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, code, "a service account without RBAC for /metrics")

	code, err = get("http", token)
	if err == nil {
		assert.Equal(t, http.StatusBadRequest, code, "plain HTTP is not served")
	}

	code, err = get("https", reader)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code, "a service account bound to get /metrics is served")
}
