// Package wire is the bottom layer of package peer: what members
// exchange, and how it is laid out on the network. It defines the
// [Message] every transport carries and every algorithm reads, its
// [Type]s and flags, and the version-6 frame format of the TCP transport
// (see frame.go): the handshake frames, and message frames sealed and
// opened with a [Direction] (MAC, connection tag, sequence number).
//
// The package does no I/O beyond [ReadFrame] and keeps no state beyond a
// Direction's sequence number; key exchange, connections and secrets are
// package peer/tcp's. Decoders never panic, whatever the bytes (the fuzz
// tests check it), and no field of a message frame is trusted before its
// MAC verified.
package wire
