package testutil

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Grants lists what a set of RBAC rules allows as sorted, distinct
// "group/resource:verb" (and "url:verb") entries, so two sets of rules
// written differently can be compared grant by grant.
func Grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, g+"/"+res+":"+v)
				}
			}
		}
		for _, u := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				out = append(out, u+":"+v)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
