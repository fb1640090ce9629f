// Package eventnote keeps an Event's note within what the API server
// stores.
//
// The events.k8s.io/v1 API refuses an Event whose note is longer than 1024
// bytes (NoteLengthLimit in Kubernetes' event validation), and client-go's
// recorder does not shorten it: the Event is dropped, with only a line in
// the manager's log. Notes that list ranks or versions (Resized,
// PlacementTimeout on a gang of hundreds of ranks) reach that length, and
// they are the Events a user most needs to see. Both controllers pass every
// note through Fit before recording it.
package eventnote

import (
	"fmt"
	"unicode/utf8"
)

// MaxBytes is the longest note the API server accepts.
const MaxBytes = 1024

// Fit returns note unchanged when it is at most MaxBytes long; otherwise
// its beginning, cut at a UTF-8 character boundary, followed by a marker
// saying how many bytes were left out, MaxBytes long at most in all.
func Fit(note string) string {
	if len(note) <= MaxBytes {
		return note
	}
	// The marker's length depends on the number it carries, which depends
	// on where the cut falls; a marker for the largest possible count is
	// never shorter, so the result always fits.
	reserve := len(marker(len(note)))
	cut := MaxBytes - reserve
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + marker(len(note)-cut)
}

func marker(omitted int) string {
	return fmt.Sprintf("… (%d more bytes)", omitted)
}
