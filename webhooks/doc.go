// Package webhooks holds the defaulting, validating and conversion webhooks.
package webhooks
