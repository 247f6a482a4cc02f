package peer

import "log/slog"

// TCPConfig configures [ListenTCP].
type TCPConfig struct {
	Self   uint64
	Group  Group
	Secret Secret
	Logger *slog.Logger
}
