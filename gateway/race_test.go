//go:build race

package gateway

// raceBuild reports a build with the race detector, under which sync.Pool
// drops a quarter of what it is given (by design, to shake out reuse bugs).
const raceBuild = true
