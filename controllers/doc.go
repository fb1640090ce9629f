// Package controllers holds one package per kind, trainingjob and
// modeldeployment, and namespaces, which tells both when a namespace is
// being deleted.
package controllers
