package security_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// forbiddenVerbs let a subject grant itself or others more than it has.
var forbiddenVerbs = []string{"escalate", "bind", "impersonate"}

// forbiddenGrants lists what is wrong with a set of rules: a wildcard
// anywhere, any access to Secrets, or a verb that escalates privileges.
func forbiddenGrants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for i, r := range rules {
		for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames, r.NonResourceURLs} {
			for _, v := range list {
				if strings.Contains(v, "*") {
					out = append(out, fmt.Sprintf("rule %d: wildcard %q", i, v))
				}
			}
		}
		for _, res := range r.Resources {
			if base, _, _ := strings.Cut(res, "/"); base == "secrets" {
				out = append(out, fmt.Sprintf("rule %d: access to %s", i, res))
			}
		}
		for _, v := range r.Verbs {
			if slices.Contains(forbiddenVerbs, v) {
				out = append(out, fmt.Sprintf("rule %d: verb %s", i, v))
			}
		}
	}
	return out
}

// The manager's ClusterRole, as controller-gen generates it from the
// controllers' markers (config/rbac/role.yaml), every other role the
// kustomize install ships, and what the bundle's CSV asks OLM to grant (and
// the ClusterRoles it ships): no wildcards, no Secrets, no escalate, bind
// or impersonate.
func TestRBACHasNoWildcardsSecretsOrEscalation(t *testing.T) {
	roles := map[string][]rbacv1.PolicyRule{}

	generated, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "config", "rbac", "role.yaml"))
	require.NoError(t, err)
	objs, err := testutil.DecodeManifests(generated)
	require.NoError(t, err)
	managerRoles := typed[rbacv1.ClusterRole](t, objs, "ClusterRole")
	require.Len(t, managerRoles, 1, "config/rbac/role.yaml holds the manager's ClusterRole")
	require.Equal(t, "manager-role", managerRoles[0].Name)
	require.NotEmpty(t, managerRoles[0].Rules)
	roles["config/rbac/role.yaml ClusterRole manager-role"] = managerRoles[0].Rules

	for _, dir := range []string{"config/rbac", "config/default"} {
		built := kustomizeBuild(t, dir)
		for _, r := range typed[rbacv1.ClusterRole](t, built, "ClusterRole") {
			roles[dir+" ClusterRole "+r.Name] = r.Rules
		}
		for _, r := range typed[rbacv1.Role](t, built, "Role") {
			roles[dir+" Role "+r.Name] = r.Rules
		}
	}

	csv := loadCSV(t)
	strategy := csv.Spec.InstallStrategy.StrategySpec
	require.NotEmpty(t, strategy.ClusterPermissions, "the CSV grants the manager no cluster permissions")
	for _, p := range strategy.ClusterPermissions {
		key := "CSV clusterPermissions " + p.ServiceAccountName
		roles[key] = append(roles[key], p.Rules...)
	}
	for _, p := range strategy.Permissions {
		key := "CSV permissions " + p.ServiceAccountName
		roles[key] = append(roles[key], p.Rules...)
	}
	bundled, err := filepath.Glob(filepath.Join(testutil.RepoRoot(), "bundle", "manifests", "*_clusterrole.yaml"))
	require.NoError(t, err)
	for _, path := range bundled {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		objs, err := testutil.DecodeManifests(data)
		require.NoError(t, err)
		for _, r := range typed[rbacv1.ClusterRole](t, objs, "ClusterRole") {
			roles["bundle ClusterRole "+r.Name] = r.Rules
		}
	}

	// The generated role reaches the CSV: each of its rules is granted there.
	assert.Subset(t, testutil.Grants(roles["CSV clusterPermissions "+strategy.ClusterPermissions[0].ServiceAccountName]),
		testutil.Grants(managerRoles[0].Rules), "the CSV does not grant what config/rbac/role.yaml says the manager needs")

	for name, rules := range roles {
		assert.Emptyf(t, forbiddenGrants(rules), "%s", name)
	}
}

// The check above fails on each thing it forbids (so a generated role that
// gains one fails the test) and passes a least-privilege rule.
func TestForbiddenGrantsCatchesEachForbiddenRule(t *testing.T) {
	for name, rule := range map[string]rbacv1.PolicyRule{
		"wildcard verb":        {APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"*"}},
		"wildcard resource":    {APIGroups: []string{"apps"}, Resources: []string{"*"}, Verbs: []string{"get"}},
		"wildcard group":       {APIGroups: []string{"*"}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		"wildcard URL":         {NonResourceURLs: []string{"/metrics/*"}, Verbs: []string{"get"}},
		"secrets":              {APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
		"secrets subresource":  {APIGroups: []string{""}, Resources: []string{"secrets/status"}, Verbs: []string{"get"}},
		"escalate":             {APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"escalate"}},
		"bind":                 {APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles"}, Verbs: []string{"bind"}},
		"impersonate":          {APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}},
		"wildcard in the name": {APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"*"}, Verbs: []string{"get"}},
	} {
		assert.NotEmptyf(t, forbiddenGrants([]rbacv1.PolicyRule{rule}), "%s is not caught", name)
	}
	assert.Empty(t, forbiddenGrants([]rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "services"}, Verbs: []string{"create", "delete", "get", "list", "watch"}},
		{APIGroups: []string{"ml.example.com"}, Resources: []string{"trainingjobs/status"}, Verbs: []string{"update", "patch"}},
	}))
}
