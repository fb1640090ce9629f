package v1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// NewHyperparameter returns a HyperparameterValue holding v, which must be a
// string, a bool or a number.
func NewHyperparameter(v any) HyperparameterValue {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("hyperparameter %v: %v", v, err))
	}
	return HyperparameterValue{Raw: raw}
}

// MarshalJSON writes the value as it was received.
func (h HyperparameterValue) MarshalJSON() ([]byte, error) {
	if len(h.Raw) == 0 {
		return []byte("null"), nil
	}
	return h.Raw, nil
}

// UnmarshalJSON keeps the raw JSON value.
func (h *HyperparameterValue) UnmarshalJSON(data []byte) error {
	if bytes.Equal(data, []byte("null")) {
		h.Raw = nil
		return nil
	}
	h.Raw = append(h.Raw[:0], data...)
	return nil
}

// IsScalar reports whether the value is a string, number or boolean.
func (h HyperparameterValue) IsScalar() bool {
	raw := bytes.TrimSpace(h.Raw)
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case '"':
		var s string
		return json.Unmarshal(raw, &s) == nil
	case 't', 'f':
		var b bool
		return json.Unmarshal(raw, &b) == nil
	case '{', '[', 'n':
		return false
	default:
		var n json.Number
		return json.Unmarshal(raw, &n) == nil
	}
}

// String renders the value the way trainers read it from the environment:
// strings unquoted, numbers and booleans as written.
func (h HyperparameterValue) String() string {
	raw := bytes.TrimSpace(h.Raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			return s
		}
	}
	return string(raw)
}

// Int returns the value as an integer when it is a whole number, or a string
// holding one.
func (h HyperparameterValue) Int() (int64, bool) {
	s := h.String()
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f == float64(int64(f)) {
		return int64(f), true
	}
	return 0, false
}
