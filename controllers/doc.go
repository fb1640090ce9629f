// Package controllers holds one package per kind: trainingjob and modeldeployment.
package controllers
