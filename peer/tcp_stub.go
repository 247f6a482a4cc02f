package peer

// ListenTCP placeholder
func ListenTCP(c TCPConfig) (Transport, error) { return nil, invalidf("not yet") }
