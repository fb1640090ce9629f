package bench

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSlopeIsTheLeastSquaresFit(t *testing.T) {
	// y = 3x + 2 plus noise (+1, 0, -1, 0, +1) that has no trend of its
	// own: the fit is exact.
	xs := []float64{0, 1, 2, 3, 4}
	ys := []float64{2 + 1, 5, 8 - 1, 11, 14 + 1}
	assert.InDelta(t, 3.0, slope(xs, ys), 1e-9)
	assert.InDelta(t, 0.0, slope([]float64{0, 1, 2}, []float64{7, 7, 7}), 1e-9)
	assert.Zero(t, slope([]float64{1}, []float64{5}), "one point has no slope")
	assert.Zero(t, slope([]float64{2, 2}, []float64{1, 9}), "no spread in x has no slope")
}

// A steady run whose live heap grows by 60 KB a minute while the allocated
// heap saws up and down: the fit sees the growth in the next-GC goal, and
// the table and the JSON carry it.
func TestSteadyRunFitsSlopesPerMinute(t *testing.T) {
	s := &SteadyRun{Pods: 4000, DurationSeconds: 240, IntervalSeconds: 60}
	for i := range 5 {
		saw := int64(10e6)
		if i%2 == 1 {
			saw = 0
		}
		s.Samples = append(s.Samples, SteadySample{
			Seconds: float64(60 * i),
			Memory: Memory{
				HeapBytes:    40e6 + saw,
				NextGCBytes:  80e6 + int64(i)*60e3,
				RSSAnonBytes: 70e6,
			},
			LoadAverage: 3,
			Pods:        4000,
		})
	}
	s.fit()
	assert.InDelta(t, 60e3, s.NextGCSlope, 1)
	assert.InDelta(t, 0, s.RSSAnonSlope, 1)
	assert.InDelta(t, 0, s.HeapAllocSlope, 1e6, "the sawtooth averages out")

	res := &Result{Steady: s, Memory: []MemoryLevel{{Pods: 0, Readings: []Memory{{RSSAnonBytes: 20e6}}, LoadAverage: 2.5}}}
	var table strings.Builder
	res.PrintTable(&table)
	assert.Contains(t, table.String(), "steady run at 4000 worker pods (4 min, 5 readings every 60 s, load 3.0 – 3.0)")
	assert.Contains(t, table.String(), "80.0 -> 80.2 MB; +60.0 KB/min")
	assert.Contains(t, table.String(), "manager memory at 0 worker pods (load 2.5)")

	data, err := json.Marshal(res)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"nextGCBytesPerMinute":60000`)
	assert.Contains(t, string(data), `"nextGCBytes":80240000`)
}

func TestSteadyPodsCountInThePodsTheNodesHold(t *testing.T) {
	c := Config{Ranks: 8, MemoryPods: []int{0, 1000}, SteadyPods: 4000}
	assert.Equal(t, 1000+16, c.Pods(), "no steady run: its pods need no room")
	c.SteadyDuration = 1
	assert.Equal(t, 4000+16, c.Pods())
}
