// Package benchmarks measures redstream side by side with the peer libraries its users
// compare it to, in one `go test -bench` run. It is its own module so that the peers never
// become dependencies of the library.
package benchmarks
