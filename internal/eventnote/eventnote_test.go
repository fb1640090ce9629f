package eventnote

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestFitKeepsNotesTheAPIServerAccepts(t *testing.T) {
	for _, n := range []string{"", "rank 3 unschedulable", strings.Repeat("x", MaxBytes)} {
		assert.Equal(t, n, Fit(n))
	}
}

func TestFitShortensLongNotesAndSaysByHowMuch(t *testing.T) {
	// A PlacementTimeout note of a 512-rank gang lists every stuck rank.
	var ranks []string
	for i := range 512 {
		ranks = append(ranks, "rank-"+strings.Repeat("9", i%4)+"-x")
	}
	for _, note := range []string{
		strings.Repeat("x", MaxBytes+1),
		"ranks unschedulable: " + strings.Join(ranks, ", "),
		strings.Repeat("é", MaxBytes), // two bytes each: a cut must not split one
		strings.Repeat("x", 1021) + "日本語",
	} {
		got := Fit(note)
		assert.LessOrEqual(t, len(got), MaxBytes, "the API server refuses notes over %d bytes", MaxBytes)
		assert.True(t, utf8.ValidString(got), "cut inside a character: %q", got[len(got)-20:])
		kept, _, found := strings.Cut(got, "… (")
		assert.True(t, found, "the note says it was shortened: %q", got[len(got)-30:])
		assert.True(t, strings.HasPrefix(note, kept), "the note keeps its beginning")
		assert.Equal(t, marker(len(note)-len(kept)), strings.TrimPrefix(got, kept), "the marker counts the bytes left out")
		assert.Greater(t, len(got), MaxBytes-20, "as much of the note as fits is kept")
	}
}
