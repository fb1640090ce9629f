// Package managertest runs the real manager (internal/manager) with the
// TrainingJob controller against envtest and reads what it serves. It is a
// separate package so its manager does not race the controller suite's.
package managertest
