package tenure

// SettleForTest is settle, for the test of an elector that stopped after
// an Acquire without an answer while another elector of the session holds
// the key.
func (s *Session) SettleForTest(key, identity, value string) { s.settle(key, identity, value) }
