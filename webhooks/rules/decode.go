package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// UndecodableValues walks the JSON document raw along the Go type t and
// returns, by field path, every value that does not decode into its field:
// a value its type's own UnmarshalJSON refuses (resource.Quantity,
// metav1.Time, intstr.IntOrString, ...), a value of the wrong JSON type, and
// a number its integer field cannot hold. p is the path of raw (nil for the
// object itself). It never reports a value encoding/json would decode.
// The defaulting webhooks answer a request they cannot decode with these
// paths instead of the decoder's bare message.
func UndecodableValues(raw json.RawMessage, t reflect.Type, p *field.Path) field.ErrorList {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if p != nil && reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			var v any
			if json.Unmarshal(raw, &v) != nil {
				v = string(raw)
			}
			return field.ErrorList{field.Invalid(p, v, err.Error())}
		}
		return nil
	}
	if p != nil {
		if err := wrongJSONType(raw, t, p); err != nil {
			return field.ErrorList{err}
		}
	}
	var errs field.ErrorList
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil
		}
		errs = append(errs, undecodableFields(obj, t, p)...)
	case reflect.Map:
		var obj map[string]json.RawMessage
		if t.Key().Kind() != reflect.String || json.Unmarshal(raw, &obj) != nil {
			return nil
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			errs = append(errs, UndecodableValues(obj[k], t.Elem(), childPath(p, "").Key(k))...)
		}
	case reflect.Slice, reflect.Array:
		var list []json.RawMessage
		if t.Elem().Kind() == reflect.Uint8 || json.Unmarshal(raw, &list) != nil {
			return nil
		}
		for i, item := range list {
			errs = append(errs, UndecodableValues(item, t.Elem(), childPath(p, "").Index(i))...)
		}
	}
	return errs
}

// wrongJSONType is the error for a JSON value (not null) that encoding/json
// cannot decode into a plain Go value of type t: the wrong JSON type, in the
// API server's words, or a number the integer type cannot hold.
func wrongJSONType(raw json.RawMessage, t reflect.Type, p *field.Path) *field.Error {
	got := jsonType(raw)
	want := ""
	switch t.Kind() {
	case reflect.Bool:
		want = "boolean"
	case reflect.String:
		want = "string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		want = "integer"
		if got == want || got == "number" {
			if _, err := strconv.ParseInt(string(raw), 10, t.Bits()); err != nil {
				return field.Invalid(p, json.RawMessage(raw), fmt.Sprintf("must be a %d-bit integer", t.Bits()))
			}
			return nil
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "integer"
		if got == want || got == "number" {
			if _, err := strconv.ParseUint(string(raw), 10, t.Bits()); err != nil {
				return field.Invalid(p, json.RawMessage(raw), fmt.Sprintf("must be an unsigned %d-bit integer", t.Bits()))
			}
			return nil
		}
	case reflect.Float32, reflect.Float64:
		want = "number"
		if got == "integer" || got == "number" {
			if _, err := strconv.ParseFloat(string(raw), t.Bits()); err != nil {
				return field.Invalid(p, json.RawMessage(raw), fmt.Sprintf("must be a %d-bit number", t.Bits()))
			}
			return nil
		}
	case reflect.Struct, reflect.Map:
		want = "object"
	case reflect.Slice, reflect.Array:
		want = "array"
		if t.Elem().Kind() == reflect.Uint8 && got == "string" {
			return nil // []byte is base64 text
		}
	default: // interface{}: anything
		return nil
	}
	if got == want {
		return nil
	}
	return field.Invalid(p, got, fmt.Sprintf("%s in body must be of type %s", p, want))
}

// jsonType is the OpenAPI type of a JSON value: integer for a number
// without a fraction or exponent, number for any other.
func jsonType(raw json.RawMessage) string {
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	if bytes.ContainsAny(raw, ".eE") {
		return "number"
	}
	return "integer"
}

// undecodableFields walks the fields of struct type t found in obj,
// embedded (inline) structs included, as encoding/json matches them.
func undecodableFields(obj map[string]json.RawMessage, t reflect.Type, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) || strings.Contains(","+opts+",", ",string,") {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			errs = append(errs, undecodableFields(obj, ft, p)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		if sub, ok := obj[name]; ok {
			errs = append(errs, UndecodableValues(sub, f.Type, childPath(p, name))...)
		}
	}
	return errs
}

// childPath is p's child name, or the root path name when p is nil; with an
// empty name it is p itself (the root of a map or list is never the object).
func childPath(p *field.Path, name string) *field.Path {
	switch {
	case name == "":
		return p
	case p == nil:
		return field.NewPath(name)
	default:
		return p.Child(name)
	}
}
