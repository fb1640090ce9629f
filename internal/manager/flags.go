package manager

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
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

// idFlag is an optional user or group ID: empty (the default) leaves it
// unset.
type idFlag struct{ id **int64 }

func (f idFlag) String() string {
	if f.id == nil || *f.id == nil {
		return ""
	}
	return strconv.FormatInt(**f.id, 10)
}

func (f idFlag) Set(s string) error {
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
