package manager

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	mlv1 "github.com/ml-operator/ml-operator/api/v1"
)

// mapFlag parses key=value[,key=value] into a map; it may be repeated.
type mapFlag map[string]string

func (m mapFlag) String() string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

func (m mapFlag) Set(s string) error {
	for _, kv := range strings.Split(s, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q is not key=value", kv)
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return nil
}

// gatewayFlag parses namespace/name[/sectionName] into a Gateway reference.
type gatewayFlag struct{ ref **mlv1.GatewayReference }

func (g gatewayFlag) String() string {
	if g.ref == nil || *g.ref == nil {
		return ""
	}
	r := *g.ref
	s := r.Namespace + "/" + r.Name
	if r.SectionName != "" {
		s += "/" + r.SectionName
	}
	return s
}

func (g gatewayFlag) Set(s string) error {
	if s == "" {
		*g.ref = nil
		return nil
	}
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" || (len(parts) == 3 && parts[2] == "") {
		return fmt.Errorf("%q is not namespace/name or namespace/name/sectionName", s)
	}
	for _, p := range parts[:2] {
		if errs := validation.IsDNS1123Subdomain(p); len(errs) > 0 {
			return fmt.Errorf("%q: %s", p, strings.Join(errs, "; "))
		}
	}
	r := &mlv1.GatewayReference{Namespace: parts[0], Name: parts[1]}
	if len(parts) == 3 {
		r.SectionName = parts[2]
	}
	*g.ref = r
	return nil
}

// idFlag is an optional user or group ID: empty (the default) leaves it
// unset.
type idFlag struct {
	id **int64
	// auto is cleared by any value, so the admin's choice (an empty one
	// too) replaces the cluster-dependent default.
	auto *bool
}

func (f idFlag) String() string {
	if f.id == nil || *f.id == nil {
		return ""
	}
	return strconv.FormatInt(**f.id, 10)
}

func (f idFlag) Set(s string) error {
	if f.auto != nil {
		*f.auto = false
	}
	if s == "" {
		*f.id = nil
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a numeric ID", s)
	}
	*f.id = &n
	return nil
}

// commandsFlag parses framework=template[;framework=template] into the
// default launch commands (mlv1.LaunchTemplate); it may be repeated. A
// template is split at white space (so ; and spaces cannot be inside a
// word); an empty one turns the framework's default command off.
type commandsFlag map[string]mlv1.LaunchTemplate

func (m commandsFlag) String() string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+m[k].String())
	}
	return strings.Join(parts, ";")
}

func (m commandsFlag) Set(s string) error {
	for _, entry := range strings.Split(s, ";") {
		if strings.TrimSpace(entry) == "" {
			continue
		}
		k, v, ok := strings.Cut(entry, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("%q is not framework=template", entry)
		}
		if !slices.Contains(mlv1.Frameworks, mlv1.Framework(k)) {
			return fmt.Errorf("%q: unknown framework %q (one of %v)", entry, k, mlv1.Frameworks)
		}
		t, err := mlv1.ParseLaunchTemplate(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		m[k] = t
	}
	return nil
}
