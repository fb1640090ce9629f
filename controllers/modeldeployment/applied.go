package modeldeployment

import (
	"encoding/json"
	"hash/fnv"
	"reflect"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// appliedRecords remembers, for every child the operator applied, the hash
// of the apply configuration and the child's mark (markOf) as the API server
// answered the apply. A child whose hash annotation still matches but whose
// mark has moved was changed by someone else (kubectl edit, another
// controller), so the next pass applies it again and takes its fields back.
//
// The records live in memory: after a restart the first pass of each
// ModelDeployment applies every child once (a no-op apply writes nothing to
// etcd), which also corrects drift that happened while the manager was
// down. The zero value is ready to use; it is safe for concurrent passes.
type appliedRecords struct {
	mu sync.Mutex
	m  map[types.NamespacedName]map[types.UID]appliedRecord
}

type appliedRecord struct {
	hash string
	mark string
}

// markOf fingerprints what anyone may change in obj: everything but its
// status, its type and the metadata the API server keeps (resourceVersion,
// generation, managedFields). Status writes (the Deployment and HPA
// controllers make them all the time) leave it alone; an edit of the spec,
// data, labels or annotations moves it. (HorizontalPodAutoscalers keep no
// generation, Services and ConfigMaps no status subresource, so neither
// generation nor resourceVersion would do for every kind.)
func markOf(obj any) string {
	data, err := json.Marshal(obj)
	if err != nil {
		return ""
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return ""
	}
	// Typed reads carry no kind and apiVersion; the apply's answer does.
	delete(fields, "status")
	delete(fields, "kind")
	delete(fields, "apiVersion")
	var meta metav1.ObjectMeta
	if err := json.Unmarshal(fields["metadata"], &meta); err != nil {
		return ""
	}
	meta.ResourceVersion, meta.Generation, meta.ManagedFields = "", 0, nil
	if fields["metadata"], err = json.Marshal(meta); err != nil {
		return ""
	}
	data, err = json.Marshal(fields) // map keys sorted: a stable encoding
	if err != nil {
		return ""
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return strconv.FormatUint(h.Sum64(), 16)
}

// unchanged reports whether live is as the operator last applied it with
// this hash: same hash, and nobody has changed it since.
func (a *appliedRecords) unchanged(owner types.NamespacedName, live client.Object, hash string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	rec, ok := a.m[owner][live.GetUID()]
	return ok && rec.hash == hash && rec.mark != "" && rec.mark == markOf(live)
}

// record remembers the child the API server returned for an apply: applied
// is the apply configuration the answer was decoded into, kind an object of
// the child's type (the live object applyChild read), so the mark is taken
// from the same encoding later reads are.
func (a *appliedRecords) record(owner types.NamespacedName, applied any, kind client.Object, hash string) {
	data, err := json.Marshal(applied)
	if err != nil {
		return
	}
	obj, ok := reflect.New(reflect.TypeOf(kind).Elem()).Interface().(client.Object)
	if !ok || json.Unmarshal(data, obj) != nil || obj.GetUID() == "" {
		return // no record: the next pass applies again
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[types.NamespacedName]map[types.UID]appliedRecord{}
	}
	if a.m[owner] == nil {
		a.m[owner] = map[types.UID]appliedRecord{}
	}
	a.m[owner][obj.GetUID()] = appliedRecord{hash: hash, mark: markOf(obj)}
}

// forget drops the records of a deleted ModelDeployment's children.
func (a *appliedRecords) forget(owner types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, owner)
}
