//go:build !race

package zk_test

const raceEnabled = false
