//go:build !race

package gateway

// raceBuild reports a build with the race detector (race_test.go).
const raceBuild = false
