package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAllowAnswersTheRequestsUID(t *testing.T) {
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"abc","object":{"spec":{"numWorkers":8}}}}`
	rec := httptest.NewRecorder()
	allow(rec, httptest.NewRequest(http.MethodPost, "/validate", strings.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("code %d: %s", rec.Code, rec.Body)
	}
	out := review{}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil ||
		out.Response.UID != "abc" || !out.Response.Allowed {
		t.Errorf("answer = %s, want the review allowed with uid abc", rec.Body)
	}
}

func TestAllowRefusesWhatIsNotAReview(t *testing.T) {
	rec := httptest.NewRecorder()
	allow(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"kind":"AdmissionReview"}`)))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("code %d, want 400 for a review without a request", rec.Code)
	}
}
